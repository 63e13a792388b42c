import subprocess
import sys
import threading
import time

import pytest

from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.errors import (
    BodyTooLargeError,
    CorruptRecordError,
    DiskFullError,
    InvalidArgumentError,
    InvalidMessageIdError,
    InvalidOffsetError,
    InvalidQueueIdError,
    InvalidTopicError,
    PropertiesTooLargeError,
    StoreClosedError,
    StoreLockedError,
    UnknownTopicError,
)
from raftlog.store.message_id import decode_message_id, encode_message_id
from raftlog.store.message_store import Message, MessageStore
from raftlog.store.record import encode_record
from raftlog.store.validation import Limits
from tests.support import make_record
from tests.support.sim_filesystem import SimFileHandle, SimFileSystem

T0 = 1_764_000_000_000


class Clock:
    def __init__(self, now_ms: int = T0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def small_config(root, **overrides) -> StoreConfig:
    fields = {
        "root_dir": str(root),
        "segment_size_bytes": 4096,
        "consume_queue_file_units": 8,
        "index_slot_count": 32,
        "index_entry_count": 64,
        "flush_mode": FlushMode.SYNC_FLUSH,
        "limits": Limits(max_body_bytes=1024, max_properties_bytes=512),
    }
    fields.update(overrides)
    return StoreConfig(**fields)


def open_store(root, fs=None, clock=None, housekeeping_interval_ms=None, **overrides):
    return MessageStore.open(
        small_config(root, **overrides),
        fs or SimFileSystem(),
        now_ms=clock or Clock(),
        housekeeping_interval_ms=housekeeping_interval_ms,
    )


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path)
    s.create_topic("orders", 4)
    yield s
    s.close()


def test_put_and_get_round_trip_with_dense_queue_offsets(store) -> None:
    messages = [Message("orders", i % 2, b"body-%d" % i, keys=(f"k{i}",)) for i in range(30)]
    results = store.put_messages(messages)
    for queue_id in (0, 1):
        got = store.get_messages("orders", queue_id, 0, 100)
        assert [m.queue_offset for m in got] == list(range(15))
        assert [m.body for m in got] == [b"body-%d" % i for i in range(queue_id, 30, 2)]
        assert got.next_queue_offset == got.max_queue_offset == 15
    for result in results:
        host, physical_offset = decode_message_id(result.msg_id)
        assert host == ("127.0.0.1", 10911) and physical_offset == result.physical_offset
    assert store.get_by_message_id(results[7].msg_id).body == b"body-7"
    assert store.get_messages("orders", 1, 3, 2).next_queue_offset == 5
    assert store.get_messages("orders", 2, 0, 10).messages == []


def test_max_bytes_returns_at_least_one_message(store) -> None:
    store.put_messages([Message("orders", 0, b"x" * 100) for _ in range(5)])
    assert len(store.get_messages("orders", 0, 0, 10, max_bytes=1)) == 1
    assert len(store.get_messages("orders", 0, 0, 10, max_bytes=500)) == 2


def test_tag_filter_skips_other_tags_and_advances(store) -> None:
    store.put_messages(
        [Message("orders", 0, b"%d" % i, tags="A" if i % 3 == 0 else "B") for i in range(12)]
    )
    got = store.get_messages("orders", 0, 0, 100, tag="A")
    assert [m.body for m in got] == [b"0", b"3", b"6", b"9"]
    assert all(m.tags == "A" for m in got)
    assert got.next_queue_offset == 12
    first_two = store.get_messages("orders", 0, 0, 2, tag="A")
    assert first_two.next_queue_offset == 4
    assert len(store.get_messages("orders", 0, 0, 100, tag="*")) == 12


def test_query_by_key_and_uniq_key_rechecks_real_key(tmp_path) -> None:
    clock = Clock()
    store = open_store(tmp_path, clock=clock)
    store.create_topic("orders", 2)
    store.create_topic("other", 1)
    for i in range(10):
        clock.now_ms = T0 + i * 10_000
        store.put_message(
            Message("orders", i % 2, b"%d" % i, keys=(f"k{i % 3}", "shared"), uniq_key=f"U{i}")
        )
    store.put_message(Message("other", 0, b"o", keys=("shared",)))
    assert [m.body for m in store.query_by_key("orders", "k0", 0, T0 + 10**6)] == [
        b"9",
        b"6",
        b"3",
        b"0",
    ]
    assert [m.body for m in store.query_by_key("orders", "U4", 0, T0 + 10**6)] == [b"4"]
    window = store.query_by_key("orders", "shared", T0 + 20_000, T0 + 50_000)
    assert [m.body for m in window] == [b"5", b"4", b"3", b"2"]
    assert len(store.query_by_key("orders", "shared", 0, T0 + 10**6, max_results=3)) == 3
    assert [m.body for m in store.query_by_key("other", "shared", 0, T0 + 10**6)] == [b"o"]
    assert store.query_by_key("orders", "missing", 0, T0 + 10**6) == []
    store.close()


def test_queue_offset_for_time(tmp_path) -> None:
    clock = Clock()
    store = open_store(tmp_path, clock=clock)
    store.create_topic("t", 1)
    for i in range(20):
        clock.now_ms = T0 + i * 1000
        store.put_message(Message("t", 0, b"x"))
    assert store.queue_offset_for_time("t", 0, 0) == 0
    assert store.queue_offset_for_time("t", 0, T0 + 7000) == 7
    assert store.queue_offset_for_time("t", 0, T0 + 7001) == 8
    assert store.queue_offset_for_time("t", 0, T0 + 10**6) == 20
    store.close()


def max_offset(store: MessageStore) -> int:
    return store.commit_log.max_offset


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (Message("bad topic", 0, b"x"), InvalidTopicError),
        (Message("x" * 128, 0, b"x"), InvalidTopicError),
        (Message("", 0, b"x"), InvalidTopicError),
        (Message("missing", 0, b"x"), UnknownTopicError),
        (Message("orders", 4, b"x"), InvalidQueueIdError),
        (Message("orders", -1, b"x"), InvalidQueueIdError),
        (Message("orders", 0, b"x" * 1025), BodyTooLargeError),
        (Message("orders", 0, b"x", properties=(("p", "v" * 600),)), PropertiesTooLargeError),
        (Message("orders", 0, b"x", properties=(("p", "a\x01b"),)), PropertiesTooLargeError),
        (Message("orders", 0, b"x", properties=(("__CRC32#", "1"),)), PropertiesTooLargeError),
        (Message("orders", 0, b"x", properties=(("TAGS", "t"),)), PropertiesTooLargeError),
        (Message("orders", 0, b"x", keys=("two words",)), PropertiesTooLargeError),
        (Message("orders", 0, b"x", tags="a\x02b"), PropertiesTooLargeError),
        # Wrong types and values beyond a field's bytes: refused, never converted or crashed on.
        (Message(5, 0, b"x"), InvalidTopicError),
        (Message("orders", "1", b"x"), InvalidQueueIdError),
        (Message("orders", 1.0, b"x"), InvalidQueueIdError),
        (Message("orders", 0, "text"), InvalidArgumentError),
        (Message("orders", 0, None), InvalidArgumentError),
        (Message("orders", 0, b"x", keys="order-1"), InvalidArgumentError),
        (Message("orders", 0, b"x", keys=(7,)), InvalidArgumentError),
        (Message("orders", 0, b"x", tags=5), InvalidArgumentError),
        (Message("orders", 0, b"x", properties=(("p", 5),)), InvalidArgumentError),
        (Message("orders", 0, b"x", properties=(("p",),)), InvalidArgumentError),
        (Message("orders", 0, b"x", tags="\ud800"), InvalidArgumentError),
        (Message("orders", 0, b"x", flag=2**31), InvalidArgumentError),
        (Message("orders", 0, b"x", sys_flag=-1), InvalidArgumentError),
        (Message("orders", 0, b"x", born_timestamp_ms=-1), InvalidArgumentError),
        (Message("orders", 0, b"x", born_timestamp_ms=2**63), InvalidArgumentError),
        (Message("orders", 0, b"x", born_host=("127.0.0.1", -1)), InvalidArgumentError),
        (Message("orders", 0, b"x", born_host=("127.0.0.1", 65536)), InvalidArgumentError),
        (Message("orders", 0, b"x", born_host=("not-an-ip", 1)), InvalidArgumentError),
        (Message("orders", 0, b"x", reconsume_times=-1), InvalidArgumentError),
        (Message("orders", 0, b"x", prepared_transaction_offset=2**63), InvalidArgumentError),
    ],
)
def test_bad_input_raises_its_error_and_writes_nothing(store, message, error) -> None:
    store.put_message(Message("orders", 0, b"first"))
    before = max_offset(store)
    good = Message("orders", 1, b"good")
    with pytest.raises(error):
        store.put_messages([good, message])
    assert max_offset(store) == before
    assert store.max_queue_offset("orders", 1) == 0
    assert store.put_message(good).queue_offset == 0


def test_limits_are_inclusive_a_body_and_topic_exactly_at_them_round_trip(store) -> None:
    longest_topic = "t" * 127
    store.create_topic(longest_topic, 1)
    largest_properties = (("p", "v" * (512 - 3)),)  # "p\x01" + value + "\x02" = 512 bytes
    results = store.put_messages(
        [
            Message("orders", 0, b"b" * 1024),
            Message(longest_topic, 0, b"t"),
            Message("orders", 1, b"p", properties=largest_properties),
        ]
    )
    assert [r.queue_offset for r in results] == [0, 0, 0]
    assert store.get_messages("orders", 0, 0).messages[0].body == b"b" * 1024
    assert store.get_messages(longest_topic, 0, 0).messages[0].topic == longest_topic
    assert store.get_messages("orders", 1, 0).messages[0].properties == largest_properties
    before = max_offset(store)
    for one_over, error in (
        (Message("orders", 0, b"b" * 1025), BodyTooLargeError),
        (Message("t" * 128, 0, b"t"), InvalidTopicError),
        (Message("orders", 1, b"p", properties=(("p", "v" * (512 - 2)),)), PropertiesTooLargeError),
    ):
        with pytest.raises(error):
            store.put_message(one_over)
    assert max_offset(store) == before


def test_reads_validate_their_arguments(store) -> None:
    with pytest.raises(UnknownTopicError):
        store.get_messages("missing", 0, 0)
    with pytest.raises(InvalidQueueIdError):
        store.get_messages("orders", 9, 0)
    with pytest.raises(InvalidOffsetError):
        store.get_messages("orders", 0, -1)
    with pytest.raises(InvalidOffsetError):
        store.get_messages("orders", 0, "0")
    for max_messages in (0, -5):
        with pytest.raises(InvalidArgumentError):
            store.get_messages("orders", 0, 0, max_messages)
    # Past the end is no error: nothing yet, and the position is kept (a replica that is
    # behind must not move a consumer back).
    store.put_message(Message("orders", 0, b"x"))
    past = store.get_messages("orders", 0, 10**6)
    assert (len(past), past.next_queue_offset, past.max_queue_offset) == (0, 10**6, 1)


def test_key_queries_refuse_an_inverted_window_an_empty_key_and_no_results(store) -> None:
    store.put_message(Message("orders", 0, b"x", keys=("k",)))
    assert [r.body for r in store.query_by_key("orders", "k", 0, T0 + 1)] == [b"x"]
    for begin_ms, end_ms, key, max_results in (
        (T0 + 1, T0, "k", 32),  # end before begin
        (0, None, "", 32),
        (0, None, None, 32),
        (0, None, "k", 0),
        (0, None, "k", -1),
    ):
        with pytest.raises(InvalidArgumentError):
            store.query_by_key("orders", key, begin_ms, end_ms, max_results)


def test_get_by_message_id_refuses_bad_ids(store) -> None:
    result = store.put_message(Message("orders", 0, b"x" * 50))
    for not_a_str in (None, 7, b"7F00000100002A9F0000000000000000"):
        with pytest.raises(InvalidMessageIdError):
            store.get_by_message_id(not_a_str)
    with pytest.raises(InvalidMessageIdError):
        store.get_by_message_id("nonsense")
    with pytest.raises(InvalidMessageIdError):  # inside the record, not at its start
        store.get_by_message_id(encode_message_id(("127.0.0.1", 10911), result.physical_offset + 4))
    with pytest.raises(InvalidMessageIdError):  # past the end
        store.get_by_message_id(encode_message_id(("127.0.0.1", 10911), 10**9))
    # Offset ids are valid on every replica: the host part is not checked.
    assert store.get_by_message_id(encode_message_id(("10.0.0.9", 1), 0)).body == b"x" * 50


def test_reopen_restores_everything(tmp_path) -> None:
    fs = SimFileSystem()
    store = open_store(tmp_path, fs)
    store.create_topic("orders", 2)
    store.put_messages([Message("orders", i % 2, b"%d" % i, keys=(f"k{i}",)) for i in range(40)])
    store.commit_consumer_offset("g", "orders", 1, 7)
    store.close()
    with pytest.raises(StoreClosedError):
        store.put_message(Message("orders", 0, b"late"))
    store = open_store(tmp_path, fs)
    assert store.list_topics()[0].queue_count == 2
    assert store.fetch_consumer_offset("g", "orders", 1) == 7
    assert store.put_message(Message("orders", 0, b"next")).queue_offset == 20
    assert [m.body for m in store.query_by_key("orders", "k33", 0, 2 * T0)] == [b"33"]
    assert store.get_messages("orders", 0, 19, 5).messages[-1].body == b"next"
    store.close()


@pytest.mark.parametrize("seed", range(12))
def test_power_loss_keeps_every_acknowledged_write(tmp_path, seed) -> None:
    import random

    rng = random.Random(seed)
    fs = SimFileSystem()
    acked: list[tuple[int, int, bytes]] = []
    for round_number in range(4):
        store = open_store(tmp_path, fs)
        store.create_topic("t", 3)
        for i in range(30):
            body = b"r%d-%d" % (round_number, i)
            result = store.put_message(Message("t", i % 3, body, keys=(body.decode(),)))
            acked.append((i % 3, result.queue_offset, body))
        if round_number % 2:
            # Writes after a checkpoint: their units and index entries are past it.
            store.checkpoint()
            body = b"after-checkpoint-%d" % round_number
            result = store.put_message(Message("t", 0, body, keys=(body.decode(),)))
            acked.append((0, result.queue_offset, body))
        fs.power_loss(rng)
        store._store_lock.release()  # the process "died": the OS drops its lock
    store = open_store(tmp_path, fs)
    for queue_id, queue_offset, body in acked:
        (record,) = store.get_messages("t", queue_id, queue_offset, 1).messages
        assert record.body == body and record.queue_offset == queue_offset
        assert [m.body for m in store.query_by_key("t", body.decode(), 0, 2 * T0)] == [body]
    for queue_id in range(3):
        count = sum(1 for acked_queue_id, _, _ in acked if acked_queue_id == queue_id)
        assert store.max_queue_offset("t", queue_id) == count
    store.close()


def test_second_open_is_refused_across_processes(tmp_path) -> None:
    store = open_store(tmp_path)
    script = (
        "import sys\n"
        "from raftlog.store.config import StoreConfig\n"
        "from raftlog.store.errors import StoreLockedError\n"
        "from raftlog.store.message_store import MessageStore\n"
        "try:\n"
        f"    MessageStore.open(StoreConfig(root_dir={str(tmp_path)!r}))\n"
        "except StoreLockedError:\n"
        "    sys.exit(3)\n"
    )
    child = subprocess.run([sys.executable, "-c", script], cwd=".", timeout=60)
    assert child.returncode == 3
    with pytest.raises(StoreLockedError):
        open_store(tmp_path)
    store.close()


def test_dispatch_bound_hides_uncommitted_messages(tmp_path) -> None:
    commit_physical_offset = 0
    store = MessageStore.open(
        small_config(tmp_path),
        SimFileSystem(),
        now_ms=Clock(),
        dispatch_bound=lambda: commit_physical_offset,
        housekeeping_interval_ms=None,
    )
    store.create_topic("t", 1)
    results = store.put_messages([Message("t", 0, b"%d" % i, keys=("k",)) for i in range(5)])
    assert store.max_queue_offset("t", 0) == 0
    assert store.get_messages("t", 0, 0, 10).messages == []
    assert store.query_by_key("t", "k", 0, 2 * T0) == []
    with pytest.raises(InvalidMessageIdError):
        store.get_by_message_id(results[0].msg_id)
    commit_physical_offset = results[3].physical_offset  # the first three are committed
    assert store.dispatch() == 3
    assert [m.body for m in store.get_messages("t", 0, 0, 10)] == [b"0", b"1", b"2"]
    # Queue offsets keep counting past the undispatched tail.
    assert store.put_message(Message("t", 0, b"5")).queue_offset == 5
    store.close()


def test_truncate_after_drops_tail_and_reassigns_queue_offsets(store) -> None:
    results = store.put_messages([Message("orders", 0, b"%d" % i, keys=("k",)) for i in range(6)])
    store.truncate_after(results[4].physical_offset)
    assert store.max_queue_offset("orders", 0) == 4
    assert len(store.query_by_key("orders", "k", 0, 2 * T0)) == 4
    assert store.put_message(Message("orders", 0, b"new")).queue_offset == 4
    assert store.get_messages("orders", 0, 4, 1).messages[0].body == b"new"


class UsageFileSystem(SimFileSystem):
    """Disk use computed from what the store holds, to test watermarks."""

    def __init__(self, bytes_per_full_disk: int) -> None:
        super().__init__()
        self.bytes_per_full_disk = bytes_per_full_disk

    def disk_usage_ratio(self, path: str) -> float:
        with self.lock:
            used = sum(
                len(inode.current) for name, inode in self._files.items() if "commitlog" in name
            )
        return used / self.bytes_per_full_disk


def test_writes_refused_above_full_watermark_and_resume_after_space_is_freed(tmp_path) -> None:
    fs = SimFileSystem()
    store = open_store(tmp_path, fs)
    store.create_topic("t", 1)
    store.put_message(Message("t", 0, b"x"))
    before = max_offset(store)
    fs.usage_ratio = 0.95
    assert store.is_disk_full()
    with pytest.raises(DiskFullError):
        store.put_message(Message("t", 0, b"y"))
    assert max_offset(store) == before
    fs.usage_ratio = 0.5
    assert store.put_message(Message("t", 0, b"y")).queue_offset == 1
    store.close()


def test_housekeeping_checkpoints_in_the_background(tmp_path) -> None:
    import time

    from raftlog.store.checkpoint import load_checkpoint

    fs = SimFileSystem()
    store = open_store(tmp_path, fs, housekeeping_interval_ms=10)
    store.create_topic("t", 1)
    store.put_messages([Message("t", 0, b"x") for _ in range(10)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        checkpoint = load_checkpoint(fs, str(tmp_path))
        if checkpoint and checkpoint.dispatched_physical_offset == store.commit_log.max_offset:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("no checkpoint was written")
    assert checkpoint.flushed_physical_offset == store.commit_log.max_offset
    store.close()


def test_reload_next_queue_offsets_after_raw_commit_log_writes(store) -> None:
    from raftlog.store.record import MessageRecord, encode_record

    store.put_messages([Message("orders", 2, b"a"), Message("orders", 2, b"b")])
    # A follower writes its leader's bytes straight into the CommitLog.
    position = store.commit_log.max_offset
    record = MessageRecord(
        topic="orders",
        queue_id=2,
        flag=0,
        queue_offset=2,
        physical_offset=position,
        sys_flag=0,
        born_timestamp_ms=T0,
        born_host=("127.0.0.1", 1),
        store_timestamp_ms=T0,
        store_host=("127.0.0.1", 10911),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=b"from the leader",
    )
    assert store.commit_log.append(encode_record(record)) == position
    store.reload_next_queue_offsets()
    assert store.put_message(Message("orders", 2, b"c")).queue_offset == 3
    assert [m.body for m in store.get_messages("orders", 2, 0, 10)] == [
        b"a",
        b"b",
        b"from the leader",
        b"c",
    ]


class SlowSyncFileSystem(SimFileSystem):
    """Every file fsync takes 2 ms, as on a real disk (an in-memory one takes no time, so
    writers would never overlap one)."""

    def open(self, path: str, create: bool = True) -> SimFileHandle:
        handle = super().open(path, create)
        plain_sync = handle.sync

        def slow_sync() -> None:
            time.sleep(0.002)
            plain_sync()

        handle.sync = slow_sync  # type: ignore[method-assign]
        return handle


def test_concurrent_sync_writers_share_fsyncs_and_get_dense_offsets(tmp_path) -> None:
    fs = SlowSyncFileSystem()
    store = open_store(tmp_path, fs)
    store.create_topic("t", 1)
    results = []
    lock = threading.Lock()

    def writer() -> None:
        for _ in range(25):
            result = store.put_message(Message("t", 0, b"x"))
            with lock:
                results.append(result.queue_offset)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == list(range(200))
    segment_syncs = sum(n for path, n in fs.sync_count.items() if "/commitlog/" in path)
    assert segment_syncs < 200
    store.close()


def encoded_block(*records) -> bytes:
    return b"".join(encode_record(record) for record in records)


def test_put_encoded_stamps_and_writes_a_producer_batch(store) -> None:
    records = [
        make_record(queue_id=i % 2, body=b"pre-%d" % i, properties=(("KEYS", f"k{i}"),))
        for i in range(6)
    ]
    store.put_messages([Message("orders", 0, b"first")])
    results = store.put_encoded(encoded_block(*records))
    assert [r.queue_offset for r in results] == [1, 0, 2, 1, 3, 2]
    got = store.get_messages("orders", 0, 1, 10)
    assert [m.body for m in got] == [b"pre-0", b"pre-2", b"pre-4"]
    assert [m.physical_offset for m in got] == [results[i].physical_offset for i in (0, 2, 4)]
    assert {m.store_timestamp_ms for m in got} == {T0}
    assert got.messages[0].born_host == ("127.0.0.1", 54321)  # kept as the producer encoded
    assert [m.body for m in store.query_by_key("orders", "k3")] == [b"pre-3"]
    assert store.put_encoded(b"") == []


@pytest.mark.parametrize(
    ("block", "error"),
    [
        (encoded_block(make_record(), make_record(topic="nope")), UnknownTopicError),
        (encoded_block(make_record(), make_record(queue_id=4)), InvalidQueueIdError),
        (encoded_block(make_record(body=b"x" * 1025)), BodyTooLargeError),
        (encoded_block(make_record()) + encode_record(make_record(), record_crc=False), None),
        (encoded_block(make_record(), make_record())[:-1], None),
        (
            encoded_block(make_record(properties=(("TAGS", "a"), ("TAGS", "b")))),
            PropertiesTooLargeError,
        ),
        ("not bytes", InvalidArgumentError),
        (None, InvalidArgumentError),
    ],
)
def test_put_encoded_refuses_the_whole_block(store, block, error) -> None:
    before = store.commit_log.max_offset
    with pytest.raises(error or CorruptRecordError):
        store.put_encoded(block)
    damaged = bytearray(encoded_block(make_record(), make_record()))
    damaged[-30] ^= 0x01  # a byte of the second record's header-protecting trailer range
    with pytest.raises(CorruptRecordError):
        store.put_encoded(bytes(damaged))
    assert store.commit_log.max_offset == before


def test_put_messages_and_put_encoded_write_the_same_bytes(tmp_path) -> None:
    stores = [open_store(tmp_path / name) for name in ("api", "encoded")]
    message = Message("orders", 1, b"same", tags="tagA", keys=("k1", "k2"), born_timestamp_ms=T0)
    record = make_record(
        body=b"same",
        born_timestamp_ms=T0,
        born_host=message.born_host,
        properties=(("KEYS", "k1 k2"), ("TAGS", "tagA")),
    )
    for s in stores:
        s.create_topic("orders", 4)
    stores[0].put_messages([message])
    stores[1].put_encoded(encode_record(record))
    written = [s.commit_log.read(0, s.commit_log.max_offset) for s in stores]
    assert written[0] == written[1]
    for s in stores:
        s.close()


def test_dispatch_from_the_write_path_derives_what_reading_the_log_derives(tmp_path) -> None:
    # The write path hands dispatch each record's place, tag hash and key hashes; a rebuild
    # from the CommitLog alone must find exactly the same units and index entries.
    fs = SimFileSystem()
    store = open_store(tmp_path, fs)
    store.create_topic("orders", 3)
    for round_number in range(6):
        store.put_messages(
            [
                Message(
                    "orders",
                    i % 3,
                    b"m" * (40 * i),
                    tags=("", "created", "paid")[i % 3],
                    keys=(f"k{round_number}-{i}", f"shared{i % 2}")[: 1 + i % 2],
                    uniq_key=f"U{round_number}-{i}" if i % 2 else "",
                )
                for i in range(7)
            ]
        )
        store.put_encoded(  # a producer's block
            encoded_block(
                make_record(
                    queue_id=round_number % 3,
                    properties=(("TAGS", "enc"), ("KEYS", f"e{round_number}"), ("p", "v")),
                )
            )
        )
    assert len(store.commit_log.segments()) >= 3  # the writes rolled segments

    def derived(store: MessageStore) -> tuple:
        units = [store.get_messages("orders", q, 0, 1000) for q in range(3)]
        by_tag = [
            [m.queue_offset for m in store.get_messages("orders", q, 0, 1000, tag=t)]
            for q in range(3)
            for t in ("created", "paid", "enc")
        ]
        keys = [f"k{r}-{i}" for r in range(6) for i in range(7)] + ["shared1", "e3", "U2-3"]
        found = [
            [m.physical_offset for m in store.query_by_key("orders", k, 0, 2 * T0, 100)]
            for k in keys
        ]
        return [[(m.queue_offset, m.physical_offset) for m in u] for u in units], by_tag, found

    written = derived(store)
    assert written[1][2] == [3, 13]  # queue 0, tag "enc": rounds 0 and 3
    store.close()
    for directory in ("consumequeue", "index"):
        fs.remove_tree(str(tmp_path / directory))
    fs.remove(str(tmp_path / "checkpoint"))
    rebuilt = open_store(tmp_path, fs)  # no checkpoint: dispatch re-reads the whole log
    assert derived(rebuilt) == written
    rebuilt.close()


def test_a_damaged_consume_queue_unit_reads_as_corruption_not_as_a_bad_argument(tmp_path) -> None:
    from raftlog.store.filesystem import OsFileSystem

    store = open_store(tmp_path, OsFileSystem())
    store.create_topic("orders", 1)
    store.put_messages([Message("orders", 0, b"m%d" % i) for i in range(4)])
    store.close()
    unit_file = tmp_path / "consumequeue" / "orders" / "0" / "00000000000000000000"
    units = bytearray(unit_file.read_bytes())
    units[2 * 20 + 1] ^= 0xFF  # the third unit's physical offset now lies far past the log
    unit_file.write_bytes(bytes(units))
    store = open_store(tmp_path, OsFileSystem())
    assert [m.body for m in store.get_messages("orders", 0, 0, 2)] == [b"m0", b"m1"]
    with pytest.raises(CorruptRecordError):
        store.get_messages("orders", 0, 0, 10)
    with pytest.raises(CorruptRecordError):
        store.queue_offset_for_time("orders", 0, T0 + 1)
    store.close()
