"""Transactional messages' records (RocketMQ's TransactionalMessageService, same names): the half
message a producer's transaction stores first, the op records that decide or count checks of
it, and the message a commit writes to the real topic (docs/messaging.md "Transactions").

Layout:
- A half message is the producer's message with topic ``HALF_TOPIC`` (one queue), sys_flag
  0x4 (prepared), and three properties added: ``REAL_TOPIC`` and ``REAL_QID`` (where a commit
  writes it) and ``PGROUP`` (the producer group a check-back goes to); its ``uniq_key`` is the
  transaction id. Consumers of the real topic never see it: it is not in that topic.
- An op record (topic ``OP_TOPIC``, one queue) names one half by its queue offset: body and
  KEYS are the offset in decimal (the IndexFile finds a half's ops by key), tag ``d`` for a
  decision and ``c`` for a check, ``TRAN_OP`` the kind (``commit``, ``rollback``, ``check``)
  and, for a check, ``TRANSACTION_CHECK_TIMES`` its number.
- A commit's message is a new record of the real topic and queue: the half's body, tags,
  keys, unique key, flag, born time and host and user properties, without ``REAL_TOPIC``,
  ``REAL_QID`` and ``TRANSACTION_CHECK_TIMES``, with sys_flag 0x8 (commit) and
  ``prepared_transaction_offset`` the half's physical offset.

Rules this module keeps:
- Only the leader writes these topics (a client may not: node/services/wire.py refuses
  them); a half is written by the producer service, ops and commits only in the entries the
  Raft leader's TransactionCoordinator proposes, a commit's message always in the same entry
  as its op record.
- Pure: no store, no clock; records in, Messages out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raftlog.node.errors import InvalidRequestError
from raftlog.node.messaging.rewrite import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    message_of_record,
)
from raftlog.store.message import Message
from raftlog.store.record import PROPERTY_UNIQ_KEY, MessageRecord

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANSACTION_QUEUE_ID = 0
TRANSACTION_QUEUE_COUNT = 1
TRANSACTION_GROUP = "__raftlog_transaction"
"""The consumer group whose offsets of the half and op queues are the leader's watermarks."""
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_OP = "TRAN_OP"
OP_COMMIT = "commit"
OP_ROLLBACK = "rollback"
OP_CHECK = "check"
DECISIONS = (OP_COMMIT, OP_ROLLBACK)
OP_TAG_DECIDED = "d"
OP_TAG_CHECKED = "c"
SYS_FLAG_TRANSACTION_MASK = 0xC
SYS_FLAG_PREPARED = 0x4
SYS_FLAG_COMMIT = 0x8
SYS_FLAG_ROLLBACK = 0xC
HALF_PROPERTIES = frozenset(
    (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_PRODUCER_GROUP, PROPERTY_CHECK_TIMES)
)
# What a commit's message does not carry (PGROUP and TRAN_MSG stay, as in RocketMQ).
_COMMIT_DROPS = frozenset((PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_CHECK_TIMES))


def is_transaction_topic(topic: str) -> bool:
    return topic in (HALF_TOPIC, OP_TOPIC)


def to_half(message: Message, producer_group: str) -> Message:
    """``message`` as the half message of a transaction of ``producer_group``."""
    properties = tuple(
        p
        for p in message.properties
        if p[0] not in HALF_PROPERTIES and p[0] != PROPERTY_TRANSACTION_PREPARED
    )
    added = (
        (PROPERTY_TRANSACTION_PREPARED, "true"),
        (PROPERTY_REAL_TOPIC, message.topic),
        (PROPERTY_REAL_QUEUE_ID, str(message.queue_id)),
        (PROPERTY_PRODUCER_GROUP, producer_group),
    )
    return dataclasses.replace(
        message,
        topic=HALF_TOPIC,
        queue_id=TRANSACTION_QUEUE_ID,
        properties=properties + added,
        sys_flag=(message.sys_flag & ~SYS_FLAG_TRANSACTION_MASK) | SYS_FLAG_PREPARED,
    )


@dataclass(frozen=True, slots=True)
class HalfMessage:
    """What the leader keeps of a stored half message. ``valid`` is False for a record that
    names no destination or group (no leader writes one): it can only be rolled back."""

    queue_offset: int
    physical_offset: int
    store_timestamp_ms: int
    transaction_id: str
    producer_group: str
    real_topic: str
    real_queue_id: int
    valid: bool = True


def half_of(record: MessageRecord) -> HalfMessage:
    """The half message ``record`` (a record of ``HALF_TOPIC``) is."""
    topic = record.get_property(PROPERTY_REAL_TOPIC) or ""
    queue_text = record.get_property(PROPERTY_REAL_QUEUE_ID) or ""
    group = record.get_property(PROPERTY_PRODUCER_GROUP) or ""
    valid = bool(topic and group and queue_text.isascii() and queue_text.isdigit())
    return HalfMessage(
        queue_offset=record.queue_offset,
        physical_offset=record.physical_offset,
        store_timestamp_ms=record.store_timestamp_ms,
        transaction_id=record.get_property(PROPERTY_UNIQ_KEY) or "",
        producer_group=group,
        real_topic=topic,
        real_queue_id=int(queue_text) if valid else 0,
        valid=valid,
    )


def half_named(
    record: MessageRecord, msg_id: str, transaction_id: str, producer_group: str, topic: str
) -> HalfMessage:
    """The half message ``msg_id`` names (``record``); InvalidRequestError when it is not the
    half of this transaction, producer group and real topic."""
    if record.topic != HALF_TOPIC:
        raise InvalidRequestError(
            f"msg_id {msg_id} names a message of topic {record.topic!r}, not a half message "
            "(send_in_transaction's result names the half)"
        )
    half = half_of(record)
    expected = (transaction_id, producer_group, topic)
    found = (half.transaction_id, half.producer_group, half.real_topic)
    if found != expected:
        raise InvalidRequestError(
            f"msg_id {msg_id} is the half of transaction {found[0]!r} of group {found[1]!r} "
            f"for topic {found[2]!r}, not of {expected[0]!r}, {expected[1]!r}, {expected[2]!r}"
        )
    return half


def committed_message(record: MessageRecord, half: HalfMessage) -> Message:
    """The message a commit of the half ``record`` writes to its real topic and queue."""
    copy = message_of_record(record, half.real_topic, half.real_queue_id, drop=_COMMIT_DROPS)
    return dataclasses.replace(
        copy,
        sys_flag=(copy.sys_flag & ~SYS_FLAG_TRANSACTION_MASK) | SYS_FLAG_COMMIT,
        prepared_transaction_offset=record.physical_offset,
    )


def op_message(half_queue_offset: int, kind: str, check_times: int = 0) -> Message:
    """The op record of ``kind`` (a decision, or the ``check_times``-th check) for the half at
    ``half_queue_offset``."""
    properties: tuple[tuple[str, str], ...] = ((PROPERTY_OP, kind),)
    if kind == OP_CHECK:
        properties += ((PROPERTY_CHECK_TIMES, str(check_times)),)
    offset_text = str(half_queue_offset)
    return Message(
        topic=OP_TOPIC,
        queue_id=TRANSACTION_QUEUE_ID,
        body=offset_text.encode(),
        tags=OP_TAG_CHECKED if kind == OP_CHECK else OP_TAG_DECIDED,
        keys=(offset_text,),
        properties=properties,
    )


@dataclass(frozen=True, slots=True)
class OpRecord:
    half_queue_offset: int
    kind: str
    check_times: int
    store_timestamp_ms: int


def op_of(record: MessageRecord) -> OpRecord | None:
    """The op an ``OP_TOPIC`` record holds; None for one no leader wrote (it is skipped)."""
    kind = record.get_property(PROPERTY_OP) or ""
    body = record.body.decode("ascii", errors="replace")
    times_text = record.get_property(PROPERTY_CHECK_TIMES) or "0"
    if kind not in (*DECISIONS, OP_CHECK) or not body.isdigit() or not times_text.isdigit():
        return None
    return OpRecord(int(body), kind, int(times_text), record.store_timestamp_ms)
