"""The server-side rewrites of a delay message: into the schedule topic when it is produced,
and back to its real topic when it is due (RocketMQ's ScheduleMessageService does the same,
with the same property names).

A schedule record is the original message with topic ``SCHEDULE_TOPIC_XXXX``, the queue of its
level (or the timer queue), and four properties added: ``REAL_TOPIC`` and ``REAL_QID`` (where
it goes when due), ``DELAY`` (its level; absent for a delivery time) and ``TIMER_DELIVER_MS``
(when it is due, in ms since the epoch; the record's ConsumeQueue unit holds the same number,
store/hashing.py ``unit_tag_hash``).

Rules this module keeps:
- Only the leader rewrites (the producer service, on the leader's clock; the scheduler): a
  client never writes the schedule topic itself (node/services/wire.py refuses it).
- The delivered copy is a new record: body, tags, keys, unique key, flag, born time and host,
  sys_flag, ``reconsume_times`` and every other property kept; the four schedule properties
  removed. Any schedule property a user set on the original is dropped when it is rewritten,
  so the copy never carries a stale one.
- Pure: no clock, no store; the caller passes the time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from raftlog.node.messaging.delay import TIMER_QUEUE_ID, level_queue_id
from raftlog.store.errors import InvalidTopicError
from raftlog.store.hashing import PROPERTY_DELIVER_MS, SCHEDULE_TOPIC
from raftlog.store.message import RESERVED_PROPERTY_KEYS, Message
from raftlog.store.record import PROPERTY_UNIQ_KEY, MessageRecord, decode_record, walk_block

PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_DELAY_LEVEL = "DELAY"
SCHEDULE_PROPERTIES = frozenset(
    (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_DELAY_LEVEL, PROPERTY_DELIVER_MS)
)
# The sys_flag bits a message may carry (the host bits come from the hosts: store/record.py).
_MESSAGE_SYS_FLAG_BITS = 0xF


def to_schedule(message: Message, deliver_ms: int, level: int | None) -> Message:
    """``message`` as a schedule record due at ``deliver_ms``: in ``level``'s queue, or the
    timer queue when ``level`` is None."""
    properties = tuple(p for p in message.properties if p[0] not in SCHEDULE_PROPERTIES)
    added = [(PROPERTY_REAL_TOPIC, message.topic), (PROPERTY_REAL_QUEUE_ID, str(message.queue_id))]
    if level is not None:
        added.append((PROPERTY_DELAY_LEVEL, str(level)))
    added.append((PROPERTY_DELIVER_MS, str(deliver_ms)))
    return dataclasses.replace(
        message,
        topic=SCHEDULE_TOPIC,
        queue_id=TIMER_QUEUE_ID if level is None else level_queue_id(level),
        properties=properties + tuple(added),
    )


def to_schedule_all(
    messages: Sequence[Message], deliver_ms: int, level: int | None
) -> list[Message]:
    return [to_schedule(message, deliver_ms, level) for message in messages]


def real_destination(record: MessageRecord) -> tuple[str, int] | None:
    """Where a schedule record goes when due (topic, queue id); None when its properties do
    not say (a record no leader wrote: it is skipped, never delivered somewhere else)."""
    topic = record.get_property(PROPERTY_REAL_TOPIC)
    queue_text = record.get_property(PROPERTY_REAL_QUEUE_ID) or ""
    if not topic or not (queue_text.isascii() and queue_text.isdigit()):
        return None
    return topic, int(queue_text)


def delivered_copy(record: MessageRecord) -> Message | None:
    """The message a due schedule record becomes in its real topic and queue (see the module
    rules); None when the record names no destination."""
    destination = real_destination(record)
    if destination is None:
        return None
    return message_of_record(record, *destination, drop=SCHEDULE_PROPERTIES)


def message_of_record(
    record: MessageRecord,
    topic: str,
    queue_id: int,
    *,
    drop: frozenset[str] = frozenset(),
    reconsume_times: int | None = None,
) -> Message:
    """A stored record as a new Message for ``topic``/``queue_id``: every field kept (the
    promoted properties back in their fields) but the properties named in ``drop``;
    ``reconsume_times`` replaces the record's when given."""
    properties = tuple(
        (name, value)
        for name, value in record.properties
        if name not in drop and name not in RESERVED_PROPERTY_KEYS
    )
    return Message(
        topic=topic,
        queue_id=queue_id,
        body=record.body,
        tags=record.tags,
        keys=record.keys,
        uniq_key=record.get_property(PROPERTY_UNIQ_KEY) or "",
        properties=properties,
        flag=record.flag,
        born_timestamp_ms=record.born_timestamp_ms,
        born_host=record.born_host,
        sys_flag=record.sys_flag & _MESSAGE_SYS_FLAG_BITS,
        reconsume_times=record.reconsume_times if reconsume_times is None else reconsume_times,
        prepared_transaction_offset=record.prepared_transaction_offset,
    )


def messages_of_records(topic: str, records: bytes) -> list[Message]:
    """A producer-encoded batch (ProduceRequest.records) as Messages, so it can be rewritten
    like a batch sent in fields: each record decoded and its CRCs checked (CorruptRecordError),
    and each must name ``topic`` (InvalidTopicError)."""
    messages: list[Message] = []
    position = 0
    for index, shape in enumerate(walk_block(records)):
        record = decode_record(records, position)
        if record.topic != topic:
            raise InvalidTopicError(
                f"record {index} names topic {record.topic!r}; the request is for {topic!r}"
            )
        messages.append(message_of_record(record, topic, record.queue_id))
        position += shape.size
    return messages
