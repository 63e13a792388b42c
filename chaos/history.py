"""The operation history a chaos workload records, and the replicas' final state.

A history is a list of :class:`Op`, in the order the workload recorded them (Jepsen's model):

* a client operation (``send``, ``poll``, ``commit-offsets``) is an ``invoke`` followed, on the
  same process, by one completion: ``ok`` (it happened), ``fail`` (it certainly did not
  happen) or ``info`` (unknown outcome: it may or may not have happened, e.g. a timeout).
  An invoke left without a completion at the end of the history counts as ``info``;
* an event (``fault-start``, ``fault-end``, ``leader-observed``) is one operation on its own,
  normally of type ``ok`` (a ``fail`` event, e.g. a fault that could not be applied, is
  ignored by the checker).

After the run, the workload reads every replica: per node, per (topic, queue), the list of
(queue offset, value) stored, and a digest of the committed CommitLog bytes
(:class:`ReplicaSnapshot`).

Rules this module keeps: plain frozen dataclasses, no dependency on the client or the wire
(so the checker stays pure and histories can be built by hand in tests); times are monotonic
nanoseconds (``time_ns``), never wall-clock; histories serialize as JSON lines, one operation
per line, so a workload can append as it goes and a history can be checked or replayed later;
:func:`loads_history` accepts exactly what :func:`dumps_history` writes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

OpType: TypeAlias = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: tuple[OpType, ...] = ("invoke", "ok", "fail", "info")

# Client operations come as invoke + completion; events are single operations.
SEND = "send"
POLL = "poll"
COMMIT_OFFSETS = "commit-offsets"
FAULT_START = "fault-start"
FAULT_END = "fault-end"
LEADER_OBSERVED = "leader-observed"
CLIENT_FUNCTIONS = frozenset({SEND, POLL, COMMIT_OFFSETS})
EVENT_FUNCTIONS = frozenset({FAULT_START, FAULT_END, LEADER_OBSERVED})

# (queue offset, value): one stored or received message, identified by its unique value.
Entry: TypeAlias = tuple[int, str]
# (topic, queue id)
QueueKey: TypeAlias = tuple[str, int]


@dataclass(frozen=True, slots=True)
class SendValue:
    """A send of one message whose body is the unique ``value``. ``queue_id`` is the queue
    asked for (None: the server picks); on ``ok`` it is the queue the message landed in, with
    its ``queue_offset`` and ``physical_offset`` (CommitLog byte offset) from the SendResult."""

    topic: str
    value: str
    queue_id: int | None = None
    queue_offset: int | None = None
    physical_offset: int | None = None


@dataclass(frozen=True, slots=True)
class PollValue:
    """A consumer ``group``'s pull from one queue; on ``ok``, the ``messages`` received, as
    (queue offset, value) in the order the server returned them."""

    group: str
    topic: str
    queue_id: int
    messages: tuple[Entry, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitValue:
    """A consumer group's offset commit: ``queue_offset`` is the next offset to consume
    (RocketMQ semantics), so everything below it counts as consumed."""

    group: str
    topic: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class FaultValue:
    """A fault (``name``: "kill", "pause", "partition"...) and the nodes it targets. A
    ``fault-end`` closes the oldest open ``fault-start`` of the same name."""

    name: str
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LeaderValue:
    """Node ``node_id`` said it was the leader in ``term``."""

    node_id: str
    term: int


OpValue: TypeAlias = SendValue | PollValue | CommitValue | FaultValue | LeaderValue

_VALUE_CLASS: dict[str, type[OpValue]] = {
    SEND: SendValue,
    POLL: PollValue,
    COMMIT_OFFSETS: CommitValue,
    FAULT_START: FaultValue,
    FAULT_END: FaultValue,
    LEADER_OBSERVED: LeaderValue,
}


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a history. ``f`` is the function (``send``, ``poll``...), ``time_ns``
    a monotonic clock reading, ``process`` the worker ("producer-1", "nemesis"...)."""

    process: str
    type: OpType
    f: str
    time_ns: int
    value: OpValue

    def __post_init__(self) -> None:
        if self.type not in OP_TYPES:
            raise ValueError(f"unknown operation type {self.type!r}")
        expected = _VALUE_CLASS.get(self.f)
        if expected is None:
            raise ValueError(f"unknown operation function {self.f!r}")
        if not isinstance(self.value, expected):
            raise TypeError(f"{self.f} needs a {expected.__name__}, not {type(self.value)}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the form of one history line)."""
        return {
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "time_ns": self.time_ns,
            "value": _value_to_dict(self.value),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Op:
        """The inverse of :meth:`to_dict`."""
        f = str(data["f"])
        value_class = _VALUE_CLASS.get(f)
        if value_class is None:
            raise ValueError(f"unknown operation function {f!r}")
        op_type = str(data["type"])
        if op_type not in OP_TYPES:
            raise ValueError(f"unknown operation type {op_type!r}")
        return cls(
            process=str(data["process"]),
            type=op_type,  # narrowed to OpType by the OP_TYPES check above
            f=f,
            time_ns=int(data["time_ns"]),
            value=_value_from_dict(value_class, data["value"]),
        )

    def to_json_line(self) -> str:
        """One line of JSON, without the newline."""
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json_line(cls, line: str) -> Op:
        """The inverse of :meth:`to_json_line`."""
        return cls.from_dict(json.loads(line))


def _value_to_dict(value: OpValue) -> dict[str, Any]:
    if isinstance(value, SendValue):
        return {
            "topic": value.topic,
            "value": value.value,
            "queue_id": value.queue_id,
            "queue_offset": value.queue_offset,
            "physical_offset": value.physical_offset,
        }
    if isinstance(value, PollValue):
        return {
            "group": value.group,
            "topic": value.topic,
            "queue_id": value.queue_id,
            "messages": [[offset, v] for offset, v in value.messages],
        }
    if isinstance(value, CommitValue):
        return {
            "group": value.group,
            "topic": value.topic,
            "queue_id": value.queue_id,
            "queue_offset": value.queue_offset,
        }
    if isinstance(value, FaultValue):
        return {"name": value.name, "targets": list(value.targets)}
    return {"node_id": value.node_id, "term": value.term}


def _optional_int(raw: Any) -> int | None:
    return None if raw is None else int(raw)


def _value_from_dict(value_class: type[OpValue], data: Mapping[str, Any]) -> OpValue:
    if value_class is SendValue:
        return SendValue(
            topic=str(data["topic"]),
            value=str(data["value"]),
            queue_id=_optional_int(data.get("queue_id")),
            queue_offset=_optional_int(data.get("queue_offset")),
            physical_offset=_optional_int(data.get("physical_offset")),
        )
    if value_class is PollValue:
        return PollValue(
            group=str(data["group"]),
            topic=str(data["topic"]),
            queue_id=int(data["queue_id"]),
            messages=tuple((int(o), str(v)) for o, v in data.get("messages", ())),
        )
    if value_class is CommitValue:
        return CommitValue(
            group=str(data["group"]),
            topic=str(data["topic"]),
            queue_id=int(data["queue_id"]),
            queue_offset=int(data["queue_offset"]),
        )
    if value_class is FaultValue:
        return FaultValue(name=str(data["name"]), targets=tuple(map(str, data["targets"])))
    return LeaderValue(node_id=str(data["node_id"]), term=int(data["term"]))


def dumps_history(ops: Iterable[Op]) -> str:
    """JSON lines: one operation per line, each line ending with a newline."""
    return "".join(op.to_json_line() + "\n" for op in ops)


def loads_history(text: str) -> list[Op]:
    """Parse JSON lines; blank lines are skipped. A malformed line raises ValueError naming
    its line number (a history cut short by a crash loses at most its last line, which the
    caller may drop and retry without)."""
    ops: list[Op] = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            ops.append(Op.from_json_line(line))
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"history line {line_number}: {error}") from error
    return ops


def write_history(path: Path, ops: Iterable[Op]) -> None:
    """Write a whole history to ``path`` as JSON lines."""
    path.write_text(dumps_history(ops), encoding="utf-8")


def read_history(path: Path) -> list[Op]:
    """Read a history written by :func:`write_history` or :class:`Recorder`."""
    return loads_history(path.read_text(encoding="utf-8"))


@dataclass(frozen=True, slots=True)
class ReplicaSnapshot:
    """What one node holds at the end of a run. ``queues`` maps (topic, queue id) to the
    (queue offset, value) list read from that node, in offset order as returned;
    ``commitlog_digest`` is a hex digest of its committed CommitLog bytes (None: the node could
    not be read), ``commitlog_bytes`` how many bytes it covers (for the report only)."""

    node_id: str
    queues: Mapping[QueueKey, tuple[Entry, ...]] = field(default_factory=dict)
    commitlog_digest: str | None = None
    commitlog_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; queues become a list, as JSON has no tuple keys."""
        return {
            "node_id": self.node_id,
            "commitlog_digest": self.commitlog_digest,
            "commitlog_bytes": self.commitlog_bytes,
            "queues": [
                {"topic": topic, "queue_id": queue_id, "entries": [[o, v] for o, v in entries]}
                for (topic, queue_id), entries in sorted(self.queues.items())
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplicaSnapshot:
        """The inverse of :meth:`to_dict`."""
        digest = data.get("commitlog_digest")
        return cls(
            node_id=str(data["node_id"]),
            commitlog_digest=None if digest is None else str(digest),
            commitlog_bytes=int(data.get("commitlog_bytes", 0)),
            queues={
                (str(q["topic"]), int(q["queue_id"])): tuple(
                    (int(o), str(v)) for o, v in q["entries"]
                )
                for q in data.get("queues", ())
            },
        )


def dumps_replicas(replicas: Sequence[ReplicaSnapshot]) -> str:
    """JSON lines: one replica snapshot per line."""
    return "".join(
        json.dumps(r.to_dict(), separators=(",", ":"), sort_keys=True) + "\n" for r in replicas
    )


def loads_replicas(text: str) -> list[ReplicaSnapshot]:
    """The inverse of :func:`dumps_replicas`."""
    return [ReplicaSnapshot.from_dict(json.loads(line)) for line in text.splitlines() if line]


class Recorder:
    """Records a history as a workload runs: thread-safe, with an injectable monotonic clock
    (tests pass a fake one). When ``path`` is given each operation is also appended to it as
    a JSON line and flushed at once, so a crashed run still leaves its history behind."""

    def __init__(
        self, path: Path | None = None, clock_ns: Callable[[], int] = time.monotonic_ns
    ) -> None:
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._file = None if path is None else path.open("a", encoding="utf-8")

    def record(self, process: str, op_type: OpType, f: str, value: OpValue) -> Op:
        """Append one operation stamped with the clock; returns it."""
        # The clock is read under the lock so that the history order and time order agree.
        with self._lock:
            op = Op(process=process, type=op_type, f=f, time_ns=self._clock_ns(), value=value)
            self._ops.append(op)
            if self._file is not None:
                self._file.write(op.to_json_line() + "\n")
                self._file.flush()
            return op

    def invoke(self, process: str, f: str, value: OpValue) -> Op:
        """Record the start of a client operation."""
        return self.record(process, "invoke", f, value)

    def complete(self, process: str, op_type: OpType, f: str, value: OpValue) -> Op:
        """Record a client operation's outcome: ``ok``, ``fail`` or ``info`` (unknown)."""
        if op_type == "invoke":
            raise ValueError("a completion is ok, fail or info")
        return self.record(process, op_type, f, value)

    def event(self, process: str, f: str, value: OpValue) -> Op:
        """Record a fault or leader observation (a single ``ok`` operation)."""
        if f not in EVENT_FUNCTIONS:
            raise ValueError(f"{f!r} is not an event function")
        return self.record(process, "ok", f, value)

    def ops(self) -> list[Op]:
        """A copy of the history so far."""
        with self._lock:
            return list(self._ops)

    def close(self) -> None:
        """Close the history file, if any."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
