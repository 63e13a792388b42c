"""The messaging side of a chaos run: the history records of delayed, ordered (sharding key),
transactional and reconsume-later traffic, and the checker of the guarantees issue 18 adds.

A messaging history is a list of :class:`MsgOp`, recorded in order, with the same model as
history.py: a client operation (``delayed-send``, ``ordered-send``, ``txn-send``,
``reconsume-later``) is an ``invoke`` then one ``ok`` / ``fail`` / ``info`` completion on the
same process; ``receive`` (what a consumer got from one poll), ``txn-check`` (the producer's
transaction checker answered the broker), ``healed`` (the nemesis stopped every fault) and
``dlq`` (what the group's dead-letter topic held at the end) are single ``ok`` events. Each
operation carries its fields in ``value`` (a plain JSON dict; the keys each function uses are
listed at :data:`FIELDS`). Wall-clock fields end in ``_ms`` (epoch milliseconds: the due time
of a delayed message is the leader's wall clock), ``time_ns`` is the monotonic order stamp.

``check_messaging(ops) -> MessagingReport``; the anomaly kinds (docs/chaos.md):

* ``early-delivery``: a delayed message stored in its topic, or received, before its due time
  (less a tolerance for the store timestamp's millisecond granularity; every node runs on one
  machine, so no clock skew is allowed);
* ``late-delivery``: an acknowledged delayed message not delivered within ``late_bound_ms``
  after max(due, healed), or never delivered;
* ``txn-duplicate``: a committed (or unknown-outcome) transactional message stored at more
  than one position; ``txn-lost``: an acknowledged committed one never delivered;
  ``txn-rolled-back-delivered``: a rolled-back one delivered;
* ``order-violation``: an orderly consumer group received a message of a sharding key before
  an earlier acknowledged message of that key from the same producer process;
* ``retry-lost``: a message sent back with ``reconsume_later`` (``ok``) never received again
  by its group and not in the group's dead-letter topic.

Rules this module keeps: pure (no I/O, no clock, no client), so hand-made histories test it;
an anomaly needs an ``ok`` completion or a received message, never an ``info``; a consumer
re-reading the same stored position is not a duplicate (at-least-once consumption); the
JSON-lines form round-trips exactly (:func:`dumps_messaging`, :func:`loads_messaging`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

OpType: TypeAlias = Literal["invoke", "ok", "fail", "info"]

DELAYED_SEND = "delayed-send"
ORDERED_SEND = "ordered-send"
TXN_SEND = "txn-send"
RECONSUME_LATER = "reconsume-later"
RECEIVE = "receive"
TXN_CHECK = "txn-check"
HEALED = "healed"
DLQ = "dlq"
CLIENT_FUNCTIONS = frozenset({DELAYED_SEND, ORDERED_SEND, TXN_SEND, RECONSUME_LATER})
EVENT_FUNCTIONS = frozenset({RECEIVE, TXN_CHECK, HEALED, DLQ})

# The value keys each function uses (documentation; the checker reads them with defaults).
FIELDS: Mapping[str, str] = {
    DELAYED_SEND: "value, topic, delay_level, level_delay_ms, deliver_at_ms, invoke_wall_ms; "
    "ok: store_timestamp_ms (of the schedule record), due_ms (a lower bound of the due time)",
    ORDERED_SEND: "value, topic, sharding_key, seq (per process and key); ok: queue_id",
    TXN_SEND: "value, topic, decision (commit | rollback | unknown-then-commit); ok: state",
    RECONSUME_LATER: "value, group, reconsume_times",
    RECEIVE: "group, orderly, messages: [{value, topic, queue_id, queue_offset, "
    "store_timestamp_ms, received_wall_ms, reconsume_times}]",
    TXN_CHECK: "value, state",
    HEALED: "wall_ms",
    DLQ: "group, values",
}

EARLY_DELIVERY = "early-delivery"
LATE_DELIVERY = "late-delivery"
TXN_DUPLICATE = "txn-duplicate"
TXN_LOST = "txn-lost"
TXN_ROLLED_BACK_DELIVERED = "txn-rolled-back-delivered"
ORDER_VIOLATION = "order-violation"
RETRY_LOST = "retry-lost"
ANOMALY_KINDS: tuple[str, ...] = (
    EARLY_DELIVERY,
    LATE_DELIVERY,
    TXN_DUPLICATE,
    TXN_LOST,
    TXN_ROLLED_BACK_DELIVERED,
    ORDER_VIOLATION,
    RETRY_LOST,
)
COMMIT = "commit"
ROLLBACK = "rollback"
UNKNOWN_THEN_COMMIT = "unknown-then-commit"
TXN_DECISIONS = (COMMIT, ROLLBACK, UNKNOWN_THEN_COMMIT)

# Store timestamps are whole milliseconds and the due time is read from the leader's clock a
# moment apart from the store timestamp: allow this much before due.
DEFAULT_EARLY_TOLERANCE_MS = 5
DEFAULT_LATE_BOUND_MS = 10_000
# (topic, queue id, queue offset)
_Position: TypeAlias = tuple[str, int, int]


class MalformedMessagingHistoryError(ValueError):
    """The history breaks the recording rules (a workload bug, not a cluster anomaly)."""


@dataclass(frozen=True, slots=True)
class MsgOp:
    """One messaging operation: ``f`` is one of the functions above, ``time_ns`` a monotonic
    reading, ``value`` the fields (:data:`FIELDS`)."""

    process: str
    type: OpType
    f: str
    time_ns: int
    value: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in ("invoke", "ok", "fail", "info"):
            raise ValueError(f"unknown operation type {self.type!r}")
        if self.f not in CLIENT_FUNCTIONS | EVENT_FUNCTIONS:
            raise ValueError(f"unknown messaging function {self.f!r}")

    def to_json_line(self) -> str:
        data = {
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "time_ns": self.time_ns,
            "value": dict(self.value),
        }
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json_line(cls, line: str) -> MsgOp:
        data = json.loads(line)
        op_type = str(data["type"])
        if op_type not in ("invoke", "ok", "fail", "info"):
            raise ValueError(f"unknown operation type {op_type!r}")
        return cls(
            process=str(data["process"]),
            type=op_type,  # type: ignore[arg-type]  # checked just above
            f=str(data["f"]),
            time_ns=int(data["time_ns"]),
            value=dict(data["value"]),
        )


def dumps_messaging(ops: Iterable[MsgOp]) -> str:
    """JSON lines, one operation per line."""
    return "".join(op.to_json_line() + "\n" for op in ops)


def loads_messaging(text: str) -> list[MsgOp]:
    """The inverse of :func:`dumps_messaging`; blank lines are skipped."""
    return [MsgOp.from_json_line(line) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True, slots=True)
class MsgAnomaly:
    """One anomaly: its ``kind`` (ANOMALY_KINDS), an explanation, the indexes of the
    operations that show it."""

    kind: str
    details: str
    op_indexes: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "details": self.details, "op_indexes": list(self.op_indexes)}


@dataclass(frozen=True, slots=True)
class MessagingReport:
    """The verdict: ``valid`` when no anomaly; ``counts`` the tallies (delayed, ordered,
    transactional and reconsume-later operations by outcome); ``max_lateness_ms`` the largest
    (store time of the delivered copy - due time) over delayed messages, and
    ``max_lateness_after_heal_ms`` the same measured from max(due, healed)."""

    anomalies: tuple[MsgAnomaly, ...]
    counts: Mapping[str, int]
    max_lateness_ms: int | None = None
    max_lateness_after_heal_ms: int | None = None

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def kinds(self) -> list[str]:
        return [a.kind for a in self.anomalies]

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "anomalies": [a.to_dict() for a in self.anomalies],
            "counts": dict(self.counts),
            "max_lateness_ms": self.max_lateness_ms,
            "max_lateness_after_heal_ms": self.max_lateness_after_heal_ms,
        }

    def render(self) -> str:
        verdict = "VALID" if self.valid else f"INVALID ({len(self.anomalies)} anomalies)"
        c = self.counts
        lines = [
            f"messaging check: {verdict}",
            f"delayed sends: {c.get('delayed-send-ok', 0)} ok, {c.get('delayed-send-info', 0)} "
            f"unknown, {c.get('delayed-delivered', 0)} delivered; max lateness "
            f"{self.max_lateness_ms} ms, after heal {self.max_lateness_after_heal_ms} ms",
            f"ordered sends: {c.get('ordered-send-ok', 0)} ok over {c.get('sharding-keys', 0)} "
            f"keys, {c.get('ordered-received', 0)} received in order",
            f"transactions: {c.get('txn-committed', 0)} committed, "
            f"{c.get('txn-rolled-back', 0)} rolled back, {c.get('txn-unknown', 0)} unknown, "
            f"{c.get('txn-checks', 0)} check-backs answered",
            f"reconsume later: {c.get('reconsume-later-ok', 0)} ok, "
            f"{c.get('reconsumed', 0)} seen again, {c.get('dead-letters', 0)} in a DLQ",
        ]
        lines += [f"  {a.kind}: {a.details}" for a in self.anomalies]
        return "\n".join(lines)


@dataclass(slots=True)
class _Call:
    """A client operation: its invoke and completion (None: never completed, i.e. info)."""

    index: int
    invoke: MsgOp
    completion: MsgOp | None = None
    completion_index: int | None = None

    @property
    def outcome(self) -> str:
        return "info" if self.completion is None else self.completion.type

    def field(self, name: str, default: Any = None) -> Any:
        if self.completion is not None and name in self.completion.value:
            return self.completion.value[name]
        return self.invoke.value.get(name, default)


@dataclass(frozen=True, slots=True)
class _Receipt:
    index: int
    group: str
    orderly: bool
    message: Mapping[str, Any]

    @property
    def position(self) -> _Position:
        m = self.message
        return (str(m["topic"]), int(m["queue_id"]), int(m["queue_offset"]))


def _pair(ops: Sequence[MsgOp]) -> dict[str, list[_Call]]:
    calls: dict[str, list[_Call]] = defaultdict(list)
    open_calls: dict[str, _Call] = {}
    last_ns = None
    for index, op in enumerate(ops):
        if last_ns is not None and op.time_ns < last_ns:
            raise MalformedMessagingHistoryError(f"op {index}: time goes backwards")
        last_ns = op.time_ns
        if op.f in EVENT_FUNCTIONS:
            continue
        if op.type == "invoke":
            if op.process in open_calls:
                raise MalformedMessagingHistoryError(
                    f"op {index}: {op.process} invokes with an operation open"
                )
            call = _Call(index, op)
            open_calls[op.process] = call
            calls[op.f].append(call)
            continue
        call_or_none = open_calls.pop(op.process, None)
        if call_or_none is None or call_or_none.invoke.f != op.f:
            raise MalformedMessagingHistoryError(f"op {index}: a completion without its invoke")
        call_or_none.completion = op
        call_or_none.completion_index = index
    return calls


def check_messaging(
    ops: Sequence[MsgOp],
    *,
    early_tolerance_ms: int = DEFAULT_EARLY_TOLERANCE_MS,
    late_bound_ms: int = DEFAULT_LATE_BOUND_MS,
) -> MessagingReport:
    """Check a messaging history (module docstring for the rules)."""
    calls = _pair(ops)
    receipts: list[_Receipt] = []
    checks: dict[str, list[str]] = defaultdict(list)
    dead_letters: dict[str, set[str]] = defaultdict(set)
    healed_wall_ms: int | None = None
    for index, op in enumerate(ops):
        if op.f == RECEIVE and op.type == "ok":
            for message in op.value.get("messages", ()):
                group, orderly = str(op.value["group"]), bool(op.value.get("orderly"))
                receipts.append(_Receipt(index, group, orderly, message))
        elif op.f == TXN_CHECK and op.type == "ok":
            checks[str(op.value["value"])].append(str(op.value["state"]))
        elif op.f == DLQ and op.type == "ok":
            dead_letters[str(op.value["group"])].update(map(str, op.value.get("values", ())))
        elif op.f == HEALED and op.type == "ok":
            healed_wall_ms = int(op.value["wall_ms"])
    by_value: dict[str, list[_Receipt]] = defaultdict(list)
    for receipt in receipts:
        by_value[str(receipt.message["value"])].append(receipt)

    anomalies: list[MsgAnomaly] = []
    counts: dict[str, int] = {}
    for f in sorted(CLIENT_FUNCTIONS):
        for call in calls.get(f, ()):
            key = f"{f}-{call.outcome}"
            counts[key] = counts.get(key, 0) + 1
    lateness = _check_delayed(
        calls.get(DELAYED_SEND, []),
        by_value,
        healed_wall_ms,
        early_tolerance_ms,
        late_bound_ms,
        anomalies,
        counts,
    )
    _check_transactions(calls.get(TXN_SEND, []), by_value, checks, anomalies, counts)
    _check_order(calls.get(ORDERED_SEND, []), receipts, anomalies, counts)
    _check_retries(calls.get(RECONSUME_LATER, []), by_value, dead_letters, anomalies, counts)
    return MessagingReport(tuple(anomalies), counts, lateness[0], lateness[1])


def _check_delayed(
    sends: Sequence[_Call],
    by_value: Mapping[str, Sequence[_Receipt]],
    healed_wall_ms: int | None,
    early_tolerance_ms: int,
    late_bound_ms: int,
    anomalies: list[MsgAnomaly],
    counts: dict[str, int],
) -> tuple[int | None, int | None]:
    """Rule 1: never before due; every acknowledged one delivered within the bound."""
    max_lateness_ms: int | None = None
    max_after_heal_ms: int | None = None
    delivered = 0
    for call in sends:
        if call.outcome == "fail":
            continue
        value = str(call.invoke.value["value"])
        deliver_at_ms = int(call.field("deliver_at_ms", 0) or 0)
        # Due: the time asked for, or the leader's store time + the level's delay; without an
        # acknowledgement, the invoke's wall time + the delay is a lower bound of it.
        due_ms = call.field("due_ms")
        if due_ms is None:
            due_ms = deliver_at_ms or (
                int(call.field("invoke_wall_ms", 0)) + int(call.field("level_delay_ms", 0))
            )
        due_ms = int(due_ms)
        received = by_value.get(value, ())
        if received:
            delivered += 1
        for receipt in received:
            stored_ms = int(receipt.message.get("store_timestamp_ms", 0))
            seen_ms = int(receipt.message.get("received_wall_ms", stored_ms))
            if min(stored_ms, seen_ms) < due_ms - early_tolerance_ms:
                anomalies.append(
                    MsgAnomaly(
                        EARLY_DELIVERY,
                        f"{value} due at {due_ms} was stored at {stored_ms} and received at "
                        f"{seen_ms} ({due_ms - min(stored_ms, seen_ms)} ms early)",
                        (call.index, receipt.index),
                    )
                )
        if call.outcome != "ok":
            continue
        if not received:
            anomalies.append(
                MsgAnomaly(LATE_DELIVERY, f"{value} (due {due_ms}) never delivered", (call.index,))
            )
            continue
        first_ms = min(int(r.message.get("store_timestamp_ms", 0)) for r in received)
        late_ms = first_ms - due_ms
        max_lateness_ms = late_ms if max_lateness_ms is None else max(max_lateness_ms, late_ms)
        # Delivered before the heal: not late after it.
        after_heal_ms = max(0, first_ms - max(due_ms, healed_wall_ms or due_ms))
        max_after_heal_ms = (
            after_heal_ms if max_after_heal_ms is None else max(max_after_heal_ms, after_heal_ms)
        )
        if after_heal_ms > late_bound_ms:
            anomalies.append(
                MsgAnomaly(
                    LATE_DELIVERY,
                    f"{value} delivered {after_heal_ms} ms after max(due, healed), bound "
                    f"{late_bound_ms} ms",
                    (call.index, received[0].index),
                )
            )
    counts["delayed-delivered"] = delivered
    return max_lateness_ms, max_after_heal_ms


def _check_transactions(
    sends: Sequence[_Call],
    by_value: Mapping[str, Sequence[_Receipt]],
    checks: Mapping[str, Sequence[str]],
    anomalies: list[MsgAnomaly],
    counts: dict[str, int],
) -> None:
    """Rule 2: committed exactly once by the end, rolled back never, unknown at most once."""
    tally = {"txn-committed": 0, "txn-rolled-back": 0, "txn-unknown": 0}
    for call in sends:
        value = str(call.invoke.value["value"])
        decision = str(call.invoke.value["decision"])
        if decision not in TXN_DECISIONS:
            raise MalformedMessagingHistoryError(f"op {call.index}: decision {decision!r}")
        positions = {r.position for r in by_value.get(value, ())}
        indexes = (call.index, *(r.index for r in by_value.get(value, ())))
        if (call.outcome == "ok" and decision == ROLLBACK) or call.outcome == "fail":
            tally["txn-rolled-back"] += 1
            if positions:
                anomalies.append(
                    MsgAnomaly(
                        TXN_ROLLED_BACK_DELIVERED,
                        f"{value} ({decision}, {call.outcome}) delivered at {sorted(positions)}",
                        indexes,
                    )
                )
            continue
        committed = call.outcome == "ok" and decision in (COMMIT, UNKNOWN_THEN_COMMIT)
        tally["txn-committed" if committed else "txn-unknown"] += 1
        if decision == ROLLBACK:  # unknown outcome, rolled back if the half was stored
            if positions:
                anomalies.append(
                    MsgAnomaly(
                        TXN_ROLLED_BACK_DELIVERED,
                        f"{value} (rollback, unknown outcome) delivered",
                        indexes,
                    )
                )
            continue
        if len(positions) > 1:
            anomalies.append(
                MsgAnomaly(TXN_DUPLICATE, f"{value} stored at {sorted(positions)}", indexes)
            )
        if committed and not positions:
            anomalies.append(
                MsgAnomaly(TXN_LOST, f"{value} ({decision}) never delivered", (call.index,))
            )
    counts.update(tally)
    counts["txn-checks"] = sum(len(states) for states in checks.values())


def _check_order(
    sends: Sequence[_Call],
    receipts: Sequence[_Receipt],
    anomalies: list[MsgAnomaly],
    counts: dict[str, int],
) -> None:
    """Rule 3: per key and producer process, an orderly group sees a message only after
    every earlier acknowledged one (re-deliveries of seen messages allowed)."""
    by_value: dict[str, _Call] = {}
    acked: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    for call in sends:
        value = str(call.invoke.value["value"])
        by_value[value] = call
        if call.outcome == "ok":
            key = (call.invoke.process, str(call.invoke.value["sharding_key"]))
            acked[key][int(call.invoke.value["seq"])] = value
    counts["sharding-keys"] = len({key for _, key in acked})
    seen: dict[str, set[str]] = defaultdict(set)
    in_order = 0
    for receipt in receipts:
        value = str(receipt.message["value"])
        sent = by_value.get(value)
        if sent is None or not receipt.orderly:
            continue
        group_seen = seen[receipt.group]
        if value not in group_seen:
            key = (sent.invoke.process, str(sent.invoke.value["sharding_key"]))
            seq = int(sent.invoke.value["seq"])
            missing = sorted(s for s, v in acked[key].items() if s < seq and v not in group_seen)
            if missing:
                anomalies.append(
                    MsgAnomaly(
                        ORDER_VIOLATION,
                        f"group {receipt.group} saw {value} (key {key[1]}, seq {seq}) before "
                        f"acknowledged seqs {missing[:5]} of {key[0]}",
                        (sent.index, receipt.index),
                    )
                )
            else:
                in_order += 1
            group_seen.add(value)
    counts["ordered-received"] = in_order


def _check_retries(
    calls: Sequence[_Call],
    by_value: Mapping[str, Sequence[_Receipt]],
    dead_letters: Mapping[str, set[str]],
    anomalies: list[MsgAnomaly],
    counts: dict[str, int],
) -> None:
    """Rule 4: a message sent back (ok) comes back to its group, or is a dead letter."""
    again = 0
    dead = 0
    for call in calls:
        if call.outcome != "ok" or call.completion_index is None:
            continue
        value, group = str(call.invoke.value["value"]), str(call.invoke.value["group"])
        later = [
            r
            for r in by_value.get(value, ())
            if r.group == group and r.index > call.completion_index
        ]
        if later:
            again += 1
        elif value in dead_letters.get(group, set()):
            dead += 1
        else:
            anomalies.append(
                MsgAnomaly(
                    RETRY_LOST,
                    f"{value} sent back by {group} never seen again nor in its DLQ",
                    (call.index,),
                )
            )
    counts["reconsumed"] = again
    counts["dead-letters"] = dead
