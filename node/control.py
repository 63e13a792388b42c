"""Control commands: the node's own replicated state (topics, consumer-group offsets, access
rules, the idempotent producers' sequences), carried through the replicated log as records of
one system topic: in Raft entries (replication = "raft"), or in the CommitLog bytes a master
streams to its slaves (replication = "master-slave").

Why records and not a third entry kind: the CommitLog entry payload is a sequence of message
records (raft_entry.py), which the store dispatches without knowing Raft. A command written as
a record of ``CONTROL_TOPIC`` (one queue) rides the same path: it is stamped by the leader with
a dense queue offset, replicated byte-identically, and readable for audit like Kafka's
``__consumer_offsets``. Applying a committed entry costs one look at its FIRST record's topic.

Layout of an entry payload:
- ``CreateTopic``, ``CommitOffsets`` or ``ChangeAccess``: exactly one control record.
- an idempotent produce: one ``ProduceMarker`` record first, then the batch's records; the
  marker is applied with the batch (same entry: atomic).
- a delay scheduler's delivery: one ``ScheduleProgress`` record first, then the delivered
  copies (records of any topics); the progress is applied with them (same entry: atomic), so
  a new leader neither loses nor repeats a delivery (node/replication/scheduler.py).
- a plain produce: only the batch's records.

Rules this module keeps: bodies are compact JSON with a version field; decoding refuses an
unknown version or shape with ValueError (a newer node's command is never half-applied);
topics starting with ``RESERVED_TOPIC_PREFIX`` are the node's, never a user's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from raftlog.store.message_store import Message, MessageStore
from raftlog.store.record import decode_record, read_dispatch_info

RESERVED_TOPIC_PREFIX = "__raftlog"
CONTROL_TOPIC = "__raftlog_control"
CONTROL_QUEUE_ID = 0
_VERSION = 1


@dataclass(frozen=True, slots=True)
class CreateTopic:
    topic: str
    queue_count: int


@dataclass(frozen=True, slots=True)
class CommitOffsets:
    group: str
    offsets: tuple[tuple[str, int, int], ...]  # (topic, queue_id, next_queue_offset)


@dataclass(frozen=True, slots=True)
class ProduceMarker:
    """The entry's batch was sent by ``producer_id`` with ``sequence``."""

    producer_id: str
    sequence: int


@dataclass(frozen=True, slots=True)
class ChangeAccess:
    """Grant (or ``revoke``) ``permissions`` on ``topic_pattern`` to ``subject`` (an access
    rule; node/security/access.py says what it means)."""

    subject: str
    topic_pattern: str
    permissions: tuple[str, ...]
    revoke: bool


@dataclass(frozen=True, slots=True)
class ScheduleProgress:
    """The entry's other records are due delay messages delivered by the scheduler. Per
    schedule queue ``(queue_id, low, delivered)``: every queue offset below ``low`` is done,
    and so is each of ``delivered`` (offsets at or past ``low``; the timer queue delivers out
    of arrival order)."""

    queues: tuple[tuple[int, int, tuple[int, ...]], ...]


ControlCommand = CreateTopic | CommitOffsets | ProduceMarker | ChangeAccess | ScheduleProgress
StoreCommand = CreateTopic | CommitOffsets | ChangeAccess
"""The commands every replica applies to its store (the rest belong to the write path)."""
STORE_COMMAND_TYPES = (CreateTopic, CommitOffsets, ChangeAccess)


def is_reserved_topic(topic: str) -> bool:
    return topic.startswith(RESERVED_TOPIC_PREFIX)


def control_message(command: ControlCommand) -> Message:
    """The record (as a store Message) that carries ``command``."""
    if isinstance(command, CreateTopic):
        body: dict[str, object] = {
            "op": "create_topic",
            "topic": command.topic,
            "queue_count": command.queue_count,
        }
    elif isinstance(command, CommitOffsets):
        body = {
            "op": "commit_offsets",
            "group": command.group,
            "offsets": [list(offset) for offset in command.offsets],
        }
    elif isinstance(command, ChangeAccess):
        body = {
            "op": "change_access",
            "subject": command.subject,
            "topic_pattern": command.topic_pattern,
            "permissions": list(command.permissions),
            "revoke": command.revoke,
        }
    elif isinstance(command, ScheduleProgress):
        body = {
            "op": "schedule_progress",
            "queues": [[q, low, list(delivered)] for q, low, delivered in command.queues],
        }
    else:
        body = {"op": "produce", "producer_id": command.producer_id, "sequence": command.sequence}
    body["v"] = _VERSION
    encoded = json.dumps(body, separators=(",", ":")).encode()
    return Message(CONTROL_TOPIC, CONTROL_QUEUE_ID, encoded)


def control_command_of(payload: bytes) -> tuple[ControlCommand, int] | None:
    """The command an entry payload starts with and its store timestamp (the leader's clock,
    the same on every replica), or None for a plain batch (or a no-op)."""
    if not payload or read_dispatch_info(payload, 0).topic != CONTROL_TOPIC:
        return None
    record = decode_record(payload, 0)
    return decode_command(record.body), record.store_timestamp_ms


def decode_command(body: bytes) -> ControlCommand:
    """The command a control record's body holds; ValueError for an unknown version or
    shape."""
    try:
        fields = json.loads(body)
        if fields.get("v") != _VERSION:
            raise ValueError(f"control record version {fields.get('v')!r} is not {_VERSION}")
        op = fields["op"]
        if op == "create_topic":
            return CreateTopic(str(fields["topic"]), int(fields["queue_count"]))
        if op == "commit_offsets":
            offsets = tuple((str(t), int(q), int(o)) for t, q, o in fields["offsets"])
            return CommitOffsets(str(fields["group"]), offsets)
        if op == "produce":
            return ProduceMarker(str(fields["producer_id"]), int(fields["sequence"]))
        if op == "schedule_progress":
            queues = tuple(
                (int(q), int(low), tuple(int(o) for o in delivered))
                for q, low, delivered in fields["queues"]
            )
            return ScheduleProgress(queues)
        if op == "change_access":
            permissions = tuple(str(name) for name in fields["permissions"])
            return ChangeAccess(
                str(fields["subject"]),
                str(fields["topic_pattern"]),
                permissions,
                bool(fields["revoke"]),
            )
    except (KeyError, TypeError, json.JSONDecodeError) as error:
        raise ValueError(f"malformed control record: {error}") from error
    raise ValueError(f"unknown control operation {op!r}")


def apply_to_store(store: MessageStore, command: StoreCommand) -> None:
    """Apply a topic, offset or access command to ``store`` (what every replica does in log
    order). Raises the store's errors; the caller decides how a replica that disagrees
    reacts."""
    if isinstance(command, CreateTopic):
        store.create_topic(command.topic, command.queue_count)
    elif isinstance(command, ChangeAccess):
        store.access_rules.change(
            command.subject, command.topic_pattern, command.permissions, revoke=command.revoke
        )
    else:
        for topic, queue_id, queue_offset in command.offsets:
            store.commit_consumer_offset(command.group, topic, queue_id, queue_offset)
