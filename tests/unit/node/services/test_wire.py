"""wire.py: ProduceMessage -> store Message -> stored record -> StoredMessage round trips, queue
selection, born hosts from gRPC peers, request checks; and ServiceLimits' helpers."""

from __future__ import annotations

import threading
import zlib
from typing import Any

import pytest

from raftlog.node.errors import InvalidRequestError
from raftlog.node.services.limits import (
    DeadlinePassedError,
    ServiceLimits,
    server_default,
    timeout_for_call,
)
from raftlog.node.services.wire import (
    QueueSelector,
    born_host_from_peer,
    physical_offset_of_message_id,
    require_client_topic,
    require_group_name,
    require_messages_or_records,
    require_producer_identity,
    store_messages,
    stored_message,
    stored_record_size_bytes,
    tag_filter,
)
from raftlog.proto import client_pb2
from raftlog.store.errors import InvalidTopicError
from raftlog.store.message_store import Message, MessageStore
from raftlog.store.record import MessageRecord, encode_record
from raftlog.store.validation import Limits
from tests.unit.node.services.conftest import QUEUE_COUNT, TOPIC


def convert(
    messages: list[client_pb2.ProduceMessage],
    selector: QueueSelector | None = None,
    born_host: tuple[str, int] = ("10.0.0.5", 4242),
) -> list[Message]:
    return store_messages(
        TOPIC,
        messages,
        queue_count_of=lambda topic: QUEUE_COUNT,
        selector=selector or QueueSelector(),
        born_host=born_host,
    )


FULL = client_pb2.ProduceMessage(
    queue_id=2,
    keys=["k1", "k2"],
    tags="red",
    uniq_key="U-9",
    properties=[client_pb2.Property(name="a", value="1"), client_pb2.Property(name="b", value="")],
    body=b"\x00body\xff",
    flag=7,
    born_timestamp_ms=1_700_000_000_123,
    sys_flag=0x1 | 0x4,
    reconsume_times=3,
)


@pytest.mark.parametrize("born_host", [("10.0.0.5", 4242), ("fe80::1", 5555)])
def test_produce_message_round_trips_through_the_store(
    store: MessageStore, born_host: tuple[str, int]
) -> None:
    (converted,) = convert([FULL], born_host=born_host)
    (result,) = store.put_messages([converted])
    (record,) = store.get_messages(TOPIC, 2, 0).messages
    stored = stored_message(record)
    assert (stored.topic, stored.queue_id, stored.queue_offset) == (TOPIC, 2, 0)
    assert stored.physical_offset == result.physical_offset
    assert stored.msg_id == result.msg_id
    assert list(stored.keys) == ["k1", "k2"]
    assert (stored.tags, stored.uniq_key) == ("red", "U-9")
    assert [(p.name, p.value) for p in stored.properties] == [("a", "1"), ("b", "")]
    assert stored.body == FULL.body
    assert stored.body_crc == zlib.crc32(FULL.body)
    assert (stored.flag, stored.reconsume_times) == (7, 3)
    assert stored.born_timestamp_ms == FULL.born_timestamp_ms
    assert stored.store_timestamp_ms > 0
    assert (stored.born_host.ip, stored.born_host.port) == born_host
    assert (stored.store_host.ip, stored.store_host.port) == ("127.0.0.1", 10911)
    ipv6_bit = 0x10 if ":" in born_host[0] else 0
    assert stored.sys_flag == 0x1 | 0x4 | ipv6_bit
    assert stored.prepared_transaction_offset == 0
    assert stored.store_size_bytes == len(encode_record(record))


def test_store_size_is_the_distance_between_consecutive_records(store: MessageStore) -> None:
    messages = convert(
        [
            client_pb2.ProduceMessage(queue_id=0, body=b"x" * size, tags="t" * size)
            for size in (0, 1, 300)
        ]
    )
    results = store.put_messages(messages)
    records = store.get_messages(TOPIC, 0, 0).messages
    for record, following in zip(records, results[1:], strict=False):
        assert stored_record_size_bytes(record) == following.physical_offset - (
            record.physical_offset
        )


def test_stored_size_counts_ipv6_hosts() -> None:
    record = MessageRecord(
        topic=TOPIC,
        queue_id=0,
        flag=0,
        queue_offset=0,
        physical_offset=0,
        sys_flag=0,
        born_timestamp_ms=1,
        born_host=("::1", 1),
        store_timestamp_ms=2,
        store_host=("2001:db8::2", 2),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=b"abc",
        properties=(("KEYS", "a b"), ("x", "y")),
    )
    assert stored_record_size_bytes(record) == len(encode_record(record))


def test_born_timestamp_zero_means_the_server_clock() -> None:
    (converted,) = convert([client_pb2.ProduceMessage(queue_id=0)])
    assert converted.born_timestamp_ms is None


def test_explicit_queue_and_sharding_key() -> None:
    keyed = client_pb2.ProduceMessage(sharding_key="customer-17")
    converted = convert([client_pb2.ProduceMessage(queue_id=3), keyed, keyed])
    expected = zlib.crc32(b"customer-17") % QUEUE_COUNT
    assert [m.queue_id for m in converted] == [3, expected, expected]


def test_round_robin_per_topic_is_thread_safe() -> None:
    selector = QueueSelector()
    picked: list[int] = []
    lock = threading.Lock()

    def pick() -> None:
        for _ in range(100):
            queue_id = selector.next_round_robin(TOPIC, QUEUE_COUNT)
            with lock:
                picked.append(queue_id)

    threads = [threading.Thread(target=pick) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(picked.count(q) for q in range(QUEUE_COUNT)) == [100] * QUEUE_COUNT
    assert selector.next_round_robin("other", QUEUE_COUNT) == 0


def test_queue_count_is_asked_only_when_needed() -> None:
    asked: list[str] = []

    def queue_count_of(topic: str) -> int:
        asked.append(topic)
        return 2

    messages = [client_pb2.ProduceMessage(queue_id=1)]
    kwargs = {"selector": QueueSelector(), "born_host": ("1.2.3.4", 1)}
    store_messages(TOPIC, messages, queue_count_of=queue_count_of, **kwargs)  # type: ignore[arg-type]
    assert asked == []
    unset = [client_pb2.ProduceMessage(), client_pb2.ProduceMessage()]
    converted = store_messages(TOPIC, unset, queue_count_of=queue_count_of, **kwargs)  # type: ignore[arg-type]
    assert asked == [TOPIC]
    assert [m.queue_id for m in converted] == [0, 1]


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"queue_id": -1}, "messages[1].queue_id must be >= 0, got -1"),
        ({"born_timestamp_ms": -1}, "messages[1].born_timestamp_ms must be >= 0, got -1"),
        ({"reconsume_times": -2}, "messages[1].reconsume_times must be >= 0, got -2"),
        ({"sys_flag": 0x10}, "messages[1].sys_flag 0x10 sets bits outside"),
        ({"sys_flag": 0x40}, "messages[1].sys_flag 0x40 sets bits outside"),
        ({"sys_flag": -1}, "messages[1].sys_flag -0x1 sets bits outside"),
    ],
)
def test_bad_produce_message_fields(fields: dict[str, Any], words: str) -> None:
    good = client_pb2.ProduceMessage(queue_id=0)
    with pytest.raises(InvalidRequestError, match=words.replace("[", r"\[").replace("]", r"\]")):
        convert([good, client_pb2.ProduceMessage(**fields)])


def test_allowed_sys_flag_bits() -> None:
    for sys_flag in (0, 0x1, 0x2, 0x4, 0x8, 0xC, 0xF):
        (converted,) = convert([client_pb2.ProduceMessage(queue_id=0, sys_flag=sys_flag)])
        assert converted.sys_flag == sys_flag


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:127.0.0.1:5555", ("127.0.0.1", 5555)),
        ("ipv6:[::1]:5555", ("::1", 5555)),
        ("ipv6:[fe80::1%eth0]:80", ("fe80::1", 80)),
        ("ipv6:[::ffff:10.1.2.3]:9", ("10.1.2.3", 9)),
        ("unix:/tmp/socket", ("0.0.0.0", 0)),
        ("ipv4:not-an-ip:1", ("0.0.0.0", 0)),
        ("ipv4:1.2.3.4:99999", ("0.0.0.0", 0)),
        ("ipv4:1.2.3.4:", ("0.0.0.0", 0)),
        ("", ("0.0.0.0", 0)),
        (None, ("0.0.0.0", 0)),
    ],
)
def test_born_host_from_peer(peer: str | None, host: tuple[str, int]) -> None:
    assert born_host_from_peer(peer) == host


def test_messages_or_records() -> None:
    both = client_pb2.ProduceRequest(messages=[client_pb2.ProduceMessage()], records=b"x")
    with pytest.raises(InvalidRequestError, match="not both"):
        require_messages_or_records(both)
    with pytest.raises(InvalidRequestError, match="empty"):
        require_messages_or_records(client_pb2.ProduceRequest())
    require_messages_or_records(client_pb2.ProduceRequest(records=b"x"))
    require_messages_or_records(client_pb2.ProduceRequest(messages=[client_pb2.ProduceMessage()]))


def test_producer_identity() -> None:
    require_producer_identity("", 0, 64)
    require_producer_identity("p" * 64, 1, 64)
    with pytest.raises(InvalidRequestError, match="65 bytes"):
        require_producer_identity("p" * 65, 1, 64)
    with pytest.raises(InvalidRequestError, match="sequence"):
        require_producer_identity("p", 0, 64)


def test_topic_and_group_names() -> None:
    limits = Limits()
    require_client_topic("orders_1%|-", limits)
    with pytest.raises(InvalidRequestError, match="reserved for raftlog's own use"):
        require_client_topic("__raftlog_control", limits)
    with pytest.raises(InvalidTopicError):
        require_client_topic("", limits)
    require_group_name("group-1", limits)
    for group in ("", "a b", "x" * 128, "__raftlog_schedule"):
        with pytest.raises(InvalidRequestError):
            require_group_name(group, limits)
    for topic in ("SCHEDULE_TOPIC_XXXX", "%RETRY%g", "%DLQ%g"):
        with pytest.raises(InvalidRequestError, match="written only by the node"):
            require_client_topic(topic, limits)


def test_message_id_parsing() -> None:
    assert physical_offset_of_message_id("7F000001" + "00002AAF" + "00000000000004D2") == 1234
    for bad in ("", "0" * 31, "Z" * 32):
        with pytest.raises(InvalidRequestError):
            physical_offset_of_message_id(bad)


def test_tag_filter() -> None:
    assert tag_filter([]) is None
    assert tag_filter(["a", "*"]) is None
    assert tag_filter(["a", "b", "a"]) == frozenset({"a", "b"})


def test_server_default_and_timeouts() -> None:
    assert server_default(0, 32, 1024) == 32
    assert server_default(5, 32, 1024) == 5
    assert server_default(5000, 32, 1024) == 1024
    assert timeout_for_call(None, 10.0) == 10.0
    assert timeout_for_call(2.5, 10.0) == 2.5
    assert timeout_for_call(20.0, 10.0) == 10.0
    with pytest.raises(DeadlinePassedError):
        timeout_for_call(0.0, 10.0)


def test_service_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_long_poll_ms"):
        ServiceLimits(max_long_poll_ms=0)
    with pytest.raises(ValueError, match="default_pull_messages"):
        ServiceLimits(default_pull_messages=2000)
