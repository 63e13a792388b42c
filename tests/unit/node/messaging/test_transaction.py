"""The records of transactional messages: the half, the op records, the committed message
(RocketMQ's names and flags)."""

from __future__ import annotations

import pytest

from raftlog.node.errors import InvalidRequestError
from raftlog.node.messaging.retry import is_node_written_topic
from raftlog.node.messaging.transaction import (
    HALF_TOPIC,
    OP_CHECK,
    OP_COMMIT,
    OP_ROLLBACK,
    OP_TOPIC,
    SYS_FLAG_COMMIT,
    SYS_FLAG_PREPARED,
    committed_message,
    half_named,
    half_of,
    op_message,
    op_of,
    to_half,
)
from raftlog.store.message import Message
from tests.unit.node.messaging.test_rewrite import record_of

ORIGINAL = Message(
    "orders",
    3,
    b"order #17",
    tags="TagA",
    keys=("k1",),
    uniq_key="TX1",
    properties=(("app", "x"), ("REAL_TOPIC", "forged"), ("PGROUP", "forged")),
    flag=7,
    born_timestamp_ms=1_000,
    born_host=("10.0.0.5", 5555),
    sys_flag=0x1 | 0x8,
)


def test_a_half_is_prepared_in_the_half_topic_with_its_real_place_and_group() -> None:
    half = to_half(ORIGINAL, "payments")
    assert (half.topic, half.queue_id) == (HALF_TOPIC, 0)
    assert half.sys_flag == 0x1 | SYS_FLAG_PREPARED
    assert half.properties == (
        ("app", "x"),
        ("TRAN_MSG", "true"),
        ("REAL_TOPIC", "orders"),
        ("REAL_QID", "3"),
        ("PGROUP", "payments"),
    )
    seen = half_of(record_of(half))
    assert (seen.real_topic, seen.real_queue_id, seen.producer_group) == ("orders", 3, "payments")
    assert (seen.transaction_id, seen.queue_offset, seen.physical_offset) == ("TX1", 4, 100)
    assert seen.valid


def test_a_half_without_a_destination_is_not_valid() -> None:
    record = record_of(Message(HALF_TOPIC, 0, b"x", uniq_key="TX2"))
    assert not half_of(record).valid


def test_the_committed_message_is_the_half_in_its_real_place_flagged_commit() -> None:
    record = record_of(to_half(ORIGINAL, "payments"))
    committed = committed_message(record, half_of(record))
    assert (committed.topic, committed.queue_id) == ("orders", 3)
    assert committed.sys_flag == 0x1 | SYS_FLAG_COMMIT
    assert committed.prepared_transaction_offset == 100  # the half's physical offset
    assert (committed.body, committed.tags, committed.keys, committed.uniq_key) == (
        b"order #17",
        "TagA",
        ("k1",),
        "TX1",
    )
    assert committed.properties == (("app", "x"), ("TRAN_MSG", "true"), ("PGROUP", "payments"))
    assert (committed.flag, committed.born_timestamp_ms, committed.born_host) == (
        7,
        1_000,
        ("10.0.0.5", 5555),
    )


def test_op_records_name_the_half_by_offset_and_round_trip() -> None:
    for kind, times in ((OP_COMMIT, 0), (OP_ROLLBACK, 0), (OP_CHECK, 4)):
        message = op_message(12, kind, times)
        assert (message.topic, message.body, message.keys) == (OP_TOPIC, b"12", ("12",))
        assert message.tags == ("c" if kind == OP_CHECK else "d")
        op = op_of(record_of(message))
        assert op is not None
        assert (op.half_queue_offset, op.kind, op.check_times, op.store_timestamp_ms) == (
            12,
            kind,
            times,
            2_000,
        )


def test_an_op_record_no_leader_wrote_is_skipped() -> None:
    assert op_of(record_of(Message(OP_TOPIC, 0, b"12"))) is None
    forged = Message(OP_TOPIC, 0, b"x", properties=(("TRAN_OP", "commit"),))
    assert op_of(record_of(forged)) is None


def test_clients_may_not_write_the_half_and_op_topics() -> None:
    assert is_node_written_topic(HALF_TOPIC)
    assert is_node_written_topic(OP_TOPIC)
    assert not is_node_written_topic("orders")


def test_an_end_must_name_the_half_of_its_transaction_group_and_topic() -> None:
    record = record_of(to_half(ORIGINAL, "payments"))
    assert half_named(record, "ID", "TX1", "payments", "orders").queue_offset == 4
    for wrong in (
        ("TX2", "payments", "orders"),
        ("TX1", "other", "orders"),
        ("TX1", "payments", "x"),
    ):
        with pytest.raises(InvalidRequestError, match="is the half of transaction 'TX1'"):
            half_named(record, "ID", *wrong)
    with pytest.raises(InvalidRequestError, match="not a half message"):
        half_named(record_of(ORIGINAL), "ID", "TX1", "payments", "orders")
