"""The rewrite of a delay message into the schedule topic and back (RocketMQ's properties)."""

from __future__ import annotations

import pytest

from raftlog.node.messaging.delay import TIMER_QUEUE_ID
from raftlog.node.messaging.rewrite import (
    delivered_copy,
    messages_of_records,
    to_schedule,
)
from raftlog.store.errors import InvalidTopicError
from raftlog.store.hashing import SCHEDULE_TOPIC
from raftlog.store.message import Message
from raftlog.store.record import MessageRecord, encode_record

ORIGINAL = Message(
    "orders",
    3,
    b"body",
    tags="TagA",
    keys=("k1", "k2"),
    uniq_key="U1",
    properties=(("app", "x"), ("DELAY", "9")),
    flag=7,
    born_timestamp_ms=1_000,
    born_host=("10.0.0.5", 5555),
    sys_flag=0x1,
    reconsume_times=2,
)


def record_of(message: Message) -> MessageRecord:
    """``message`` as the store would hand it back (promoted properties in the record)."""
    promoted = (
        ("KEYS", " ".join(message.keys)),
        ("TAGS", message.tags),
        ("UNIQ_KEY", message.uniq_key),
    )
    return MessageRecord(
        topic=message.topic,
        queue_id=message.queue_id,
        flag=message.flag,
        queue_offset=4,
        physical_offset=100,
        sys_flag=message.sys_flag,
        born_timestamp_ms=message.born_timestamp_ms or 0,
        born_host=message.born_host,
        store_timestamp_ms=2_000,
        store_host=("127.0.0.1", 10911),
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=0,
        body=message.body,
        properties=tuple(p for p in promoted if p[1]) + message.properties,
    )


def test_a_level_goes_to_its_queue_with_the_real_place() -> None:
    scheduled = to_schedule(ORIGINAL, deliver_ms=9_999, level=3)
    assert (scheduled.topic, scheduled.queue_id) == (SCHEDULE_TOPIC, 2)
    assert scheduled.properties == (
        ("app", "x"),  # the user's stale DELAY is dropped
        ("REAL_TOPIC", "orders"),
        ("REAL_QID", "3"),
        ("DELAY", "3"),
        ("TIMER_DELIVER_MS", "9999"),
    )
    assert (scheduled.body, scheduled.tags, scheduled.reconsume_times) == (b"body", "TagA", 2)


def test_a_delivery_time_goes_to_the_timer_queue() -> None:
    scheduled = to_schedule(ORIGINAL, deliver_ms=9_999, level=None)
    assert scheduled.queue_id == TIMER_QUEUE_ID
    assert ("DELAY", "3") not in scheduled.properties
    assert ("TIMER_DELIVER_MS", "9999") in scheduled.properties


def test_the_delivered_copy_is_the_original_without_schedule_properties() -> None:
    copy = delivered_copy(record_of(to_schedule(ORIGINAL, deliver_ms=9_999, level=3)))
    assert copy is not None
    assert copy == Message(
        "orders",
        3,
        b"body",
        tags="TagA",
        keys=("k1", "k2"),
        uniq_key="U1",
        properties=(("app", "x"),),
        flag=7,
        born_timestamp_ms=1_000,
        born_host=("10.0.0.5", 5555),
        sys_flag=0x1,
        reconsume_times=2,
    )


def test_a_record_without_destination_is_not_delivered() -> None:
    assert delivered_copy(record_of(Message(SCHEDULE_TOPIC, 0, b"x"))) is None
    bad_queue = Message(
        SCHEDULE_TOPIC, 0, b"x", properties=(("REAL_TOPIC", "t"), ("REAL_QID", "q"))
    )
    assert delivered_copy(record_of(bad_queue)) is None


def test_producer_encoded_records_become_messages() -> None:
    records = encode_record(record_of(ORIGINAL)) + encode_record(record_of(ORIGINAL))
    messages = messages_of_records("orders", records)
    assert len(messages) == 2
    assert messages[0].properties == ORIGINAL.properties
    assert (messages[0].keys, messages[0].uniq_key) == (("k1", "k2"), "U1")
    with pytest.raises(InvalidTopicError, match="record 0 names topic 'orders'"):
        messages_of_records("other", records)
