import os

from raftlog.store.commit_log import CommitLog
from raftlog.store.consume_queue import ConsumeQueue, FileHandleCache
from raftlog.store.dispatcher import Dispatcher
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.hashing import tag_hash
from raftlog.store.index_file import IndexService
from raftlog.store.record import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    MessageRecord,
    encode_record,
)

T0 = 1_700_000_000_000


class Harness:
    def __init__(self, root, segment_size_bytes=4096, batch_records=3):
        fs = OsFileSystem()
        self.commit_log = CommitLog(fs, os.path.join(root, "commitlog"), segment_size_bytes)
        self.handles = FileHandleCache(fs, 8)
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.index = IndexService(fs, self.handles, str(root), 16, 100, lambda: T0)
        self.fs = fs
        self.root = str(root)
        self.dispatcher = Dispatcher(self.commit_log, self.queue, self.index, 0, batch_records)
        self.next_queue_offsets: dict[tuple[str, int], int] = {}

    def queue(self, topic, queue_id):
        key = (topic, queue_id)
        if key not in self.queues:
            self.queues[key] = ConsumeQueue(self.fs, self.handles, self.root, topic, queue_id, 4)
        return self.queues[key]

    def write(self, topic, queue_id, body, tags="", keys="", uniq_key=""):
        queue_offset = self.next_queue_offsets.get((topic, queue_id), 0)
        self.next_queue_offsets[(topic, queue_id)] = queue_offset + 1
        properties = tuple(
            (name, value)
            for name, value in (
                (PROPERTY_TAGS, tags),
                (PROPERTY_KEYS, keys),
                (PROPERTY_UNIQ_KEY, uniq_key),
            )
            if value
        )

        def encode(physical_offset):
            return encode_record(
                MessageRecord(
                    topic=topic,
                    queue_id=queue_id,
                    flag=0,
                    queue_offset=queue_offset,
                    physical_offset=physical_offset,
                    sys_flag=0,
                    born_timestamp_ms=T0,
                    born_host=("127.0.0.1", 1),
                    store_timestamp_ms=T0 + queue_offset,
                    store_host=("127.0.0.1", 2),
                    reconsume_times=0,
                    prepared_transaction_offset=0,
                    body=body,
                    properties=properties,
                )
            )

        size = len(encode(0))
        position = self.commit_log.position_for(size)
        assert self.commit_log.append(encode(position)) == position
        return position


def test_dispatch_appends_units_and_index_entries(tmp_path) -> None:
    h = Harness(tmp_path)
    first = h.write("orders", 0, b"a", tags="created", keys="k1 k2", uniq_key="U1")
    second = h.write("orders", 1, b"b")
    third = h.write("orders", 0, b"c", tags="paid", keys="k1")
    assert h.dispatcher.dispatch(h.commit_log.max_offset) == 3
    assert h.dispatcher.dispatched_physical_offset == h.commit_log.max_offset
    units = h.queue("orders", 0).read(0, 10)
    assert [u.physical_offset for u in units] == [first, third]
    assert [u.tag_hash for u in units] == [tag_hash("created"), tag_hash("paid")]
    assert h.queue("orders", 1).read(0, 10)[0].physical_offset == second
    assert h.queue("orders", 1).read(0, 10)[0].tag_hash == 0
    assert h.index.query("orders", "k1", T0, T0 + 10, 10) == [third, first]
    assert h.index.query("orders", "k2", T0, T0 + 10, 10) == [first]
    assert h.index.query("orders", "U1", T0, T0 + 10, 10) == [first]


def test_dispatch_never_passes_the_bound(tmp_path) -> None:
    h = Harness(tmp_path)
    positions = [h.write("t", 0, b"x" * 10) for _ in range(5)]
    # A bound inside the fourth record: only three are visible.
    assert h.dispatcher.dispatch(positions[3] + 5) == 3
    assert h.dispatcher.dispatched_physical_offset == positions[3]
    assert h.queue("t", 0).max_queue_offset == 3
    assert h.dispatcher.dispatch(positions[3] + 5) == 0
    assert h.dispatcher.dispatch(10**12) == 2
    assert h.queue("t", 0).max_queue_offset == 5


def test_dispatch_crosses_segment_blanks_in_batches(tmp_path) -> None:
    h = Harness(tmp_path, segment_size_bytes=1024, batch_records=4)
    positions = [h.write(f"t{i % 3}", i % 2, b"y" * 100, keys=f"k{i}") for i in range(30)]
    assert len({p // 1024 for p in positions}) > 3  # several segments
    for bound in (positions[7], positions[20], h.commit_log.max_offset):
        h.dispatcher.dispatch(bound)
    total = sum(q.max_queue_offset for q in h.queues.values())
    assert total == 30
    for i, position in enumerate(positions):
        assert h.index.query(f"t{i % 3}", f"k{i}", T0, T0 + 100, 5) == [position]


def test_dispatch_steps_into_envelopes(tmp_path) -> None:
    import struct

    from raftlog.store.commit_log import Envelope

    magic, header_bytes = 0x5AFE0001, 16
    fs = OsFileSystem()
    commit_log = CommitLog(
        fs,
        os.path.join(tmp_path, "commitlog"),
        4096,
        envelopes=[Envelope(magic, header_bytes, lambda item: True)],
    )
    handles = FileHandleCache(fs, 8)
    queues: dict[tuple[str, int], ConsumeQueue] = {}

    def queue(topic, queue_id):
        if (topic, queue_id) not in queues:
            queues[(topic, queue_id)] = ConsumeQueue(fs, handles, str(tmp_path), topic, queue_id, 4)
        return queues[(topic, queue_id)]

    index = IndexService(fs, handles, str(tmp_path), 16, 100, lambda: T0)
    records = []
    position = header_bytes
    for queue_offset in range(3):
        record = encode_record(
            MessageRecord(
                topic="raft",
                queue_id=0,
                flag=0,
                queue_offset=queue_offset,
                physical_offset=position,
                sys_flag=0,
                born_timestamp_ms=T0,
                born_host=("127.0.0.1", 1),
                store_timestamp_ms=T0,
                store_host=("127.0.0.1", 2),
                reconsume_times=0,
                prepared_transaction_offset=0,
                body=b"entry",
                properties=((PROPERTY_KEYS, f"k{queue_offset}"),),
            )
        )
        records.append((position, record))
        position += len(record)
    payload = b"".join(record for _, record in records)
    envelope = struct.pack(">iIq", header_bytes + len(payload), magic, 7) + payload
    assert commit_log.append(envelope) == 0
    dispatcher = Dispatcher(commit_log, queue, index, 0)
    assert dispatcher.dispatch(commit_log.max_offset) == 3
    assert [u.physical_offset for u in queue("raft", 0).read(0, 10)] == [p for p, _ in records]
    assert index.query("raft", "k2", T0, T0, 5) == [records[2][0]]


def test_expected_records_are_taken_as_given_only_where_dispatch_stands(tmp_path) -> None:
    h = Harness(tmp_path, segment_size_bytes=1024)
    positions = [h.write("t", 0, b"z" * 300, tags="real") for _ in range(7)]
    size = positions[1] - positions[0]
    assert positions[2] == 1024  # the third record rolled to the second segment
    marked = 77  # a tag hash no record has: it shows where an expectation was used

    def expected(index: int) -> tuple:
        return (positions[index], size, ("t", 0), index, marked, (), T0)

    # Expectations whose predecessor ends where dispatch stands (across the roll: the log
    # ended at positions[1] + size) are used as given; the fourth record, appended but not
    # expected, is read from the CommitLog.
    h.dispatcher.expect(0, [expected(0), expected(1), expected(2)])
    assert h.dispatcher.dispatch(positions[4]) == 4
    tags = [u.tag_hash for u in h.queue("t", 0).read(0, 10)]
    assert tags == [marked] * 3 + [tag_hash("real")]
    # Its late expectation is behind dispatch: dropped. One whose predecessor is not where
    # dispatch stands (the record before it was never expected) is discarded: both are read.
    h.dispatcher.expect(positions[2] + size, [expected(3)])
    h.dispatcher.expect(positions[5], [expected(5)])
    assert h.dispatcher.dispatch(positions[6]) == 2
    assert [u.tag_hash for u in h.queue("t", 0).read(4, 10)] == [tag_hash("real")] * 2
    # After a truncation or a reset nothing expected before it is used.
    h.dispatcher.expect(positions[6], [expected(6)])
    h.dispatcher.forget_expected()
    assert h.dispatcher.dispatch(h.commit_log.max_offset) == 1
    assert h.queue("t", 0).read(6, 1)[0].tag_hash == tag_hash("real")
