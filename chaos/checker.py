"""The chaos checker: decides whether a recorded history and the replicas' final state show
any anomaly, and how long the cluster took to recover from each fault.

``check(history, replicas) -> Report``. The anomaly kinds (Jepsen's words where they fit;
docs/chaos.md explains each one):

* ``lost-write``: an acknowledged send (or a value a consumer received) that no replica holds,
  or that no replica holds at the acknowledged (queue, offset);
* ``duplicate``: a value stored at more than one position on one replica, or received by
  consumers at more than one position;
* ``inconsistent-offsets``: a replica's queue offsets are not dense (a gap, or an offset
  twice), or one (queue, offset) holds different values on different replicas or polls;
* ``poll-skip``: a consumer group moved past offsets it had never consumed;
* ``nonmonotonic-poll``: a poll went below the group's committed offset, or its offsets did
  not strictly increase (a re-delivery from the committed offset is allowed);
* ``multiple-leaders``: two nodes observed as leader in one term;
* ``committed-logs-disagree``: the replicas' committed CommitLog digests differ;
* ``unexpected``: a stored or received value that was never sent, or whose send failed.

Sends of unknown outcome (``info``) are allowed either way: those that never appear are
counted as ``unseen``, never reported as anomalies.

With ``acknowledged_loss_allowed`` (an ASYNC_MASTER group, which acknowledges before any slave
has the write), an acknowledged write on no replica is counted, not reported: ``losses`` groups
them by the fault they were lost around, with each window in seconds (loss.py), and what such a
loss implies is counted with it rather than reported: a consumer that received a lost value at
an offset a later write took, and a re-delivery below a committed offset (the commit was lost
with the master's tail; counted as ``commits-lost``). A value stored at another position than
acknowledged is still an anomaly.

Rules this module keeps: it is pure (no I/O, no clock, no randomness), so the same history
always gives the same report; it only reports what the history proves (an anomaly needs an
``ok`` completion or a stored value, never an ``info``); a history that breaks the recording
rules (a completion without its invoke, a value sent twice, time going backwards...) raises
:class:`MalformedHistoryError`, because that is a workload bug, not a cluster anomaly.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from raftlog.chaos.history import (
    COMMIT_OFFSETS,
    EVENT_FUNCTIONS,
    FAULT_END,
    FAULT_START,
    LEADER_OBSERVED,
    POLL,
    SEND,
    CommitValue,
    FaultValue,
    LeaderValue,
    Op,
    PollValue,
    QueueKey,
    ReplicaSnapshot,
    SendValue,
)
from raftlog.chaos.loss import LossWindow, loss_windows

LOST_WRITE = "lost-write"
DUPLICATE = "duplicate"
INCONSISTENT_OFFSETS = "inconsistent-offsets"
POLL_SKIP = "poll-skip"
NONMONOTONIC_POLL = "nonmonotonic-poll"
MULTIPLE_LEADERS = "multiple-leaders"
COMMITTED_LOGS_DISAGREE = "committed-logs-disagree"
UNEXPECTED = "unexpected"
ANOMALY_KINDS: tuple[str, ...] = (
    LOST_WRITE,
    DUPLICATE,
    INCONSISTENT_OFFSETS,
    POLL_SKIP,
    NONMONOTONIC_POLL,
    MULTIPLE_LEADERS,
    COMMITTED_LOGS_DISAGREE,
    UNEXPECTED,
)

_NS_PER_MS = 1_000_000
_NS_PER_S = 1_000_000_000
# Position of a message: (topic, queue id, queue offset).
_Position = tuple[str, int, int]


class MalformedHistoryError(ValueError):
    """The history breaks the recording rules (a workload bug, not a cluster anomaly)."""


@dataclass(frozen=True, slots=True)
class OpRef:
    """An operation and its index in the history (its line number - 1 in the JSON lines)."""

    index: int
    op: Op


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One anomaly: its ``kind`` (one of ANOMALY_KINDS), a readable explanation, and the
    operations that show it (empty when only the replicas' final state shows it)."""

    kind: str
    details: str
    ops: tuple[OpRef, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "details": self.details,
            "ops": [{"index": ref.index, **ref.op.to_dict()} for ref in self.ops],
        }


@dataclass(frozen=True, slots=True)
class FaultRecovery:
    """How long the cluster took to acknowledge a write after one fault: from the fault's
    start (``recovery_ms``) and from its end (``recovery_after_end_ms``) to the earliest
    acknowledgement of a send invoked after that point. None: no such acknowledgement (or,
    for the end, the fault never ended)."""

    name: str
    targets: tuple[str, ...]
    start_index: int
    start_ns: int
    end_index: int | None
    end_ns: int | None
    recovery_ms: float | None
    recovery_after_end_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "targets": list(self.targets),
            "start_index": self.start_index,
            "start_ns": self.start_ns,
            "end_index": self.end_index,
            "end_ns": self.end_ns,
            "recovery_ms": self.recovery_ms,
            "recovery_after_end_ms": self.recovery_after_end_ms,
        }


@dataclass(frozen=True, slots=True)
class Report:
    """The checker's verdict. ``valid`` is True when there is no anomaly; ``counts`` holds
    operation tallies (sends by outcome, unseen, polls...); ``unseen`` the values of
    unknown-outcome sends that never appeared (allowed)."""

    anomalies: tuple[Anomaly, ...]
    counts: Mapping[str, int]
    recoveries: tuple[FaultRecovery, ...]
    unseen: tuple[str, ...] = ()
    start_ns: int = 0  # the history's first time, so render() can print relative times
    losses: tuple[LossWindow, ...] = ()  # counted loss (acknowledged_loss_allowed only)

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def kinds(self) -> list[str]:
        """The anomaly kinds, one per anomaly, in report order."""
        return [a.kind for a in self.anomalies]

    def anomaly_counts(self) -> dict[str, int]:
        """Anomalies per kind (only kinds that occur)."""
        tally: dict[str, int] = {}
        for anomaly in self.anomalies:
            tally[anomaly.kind] = tally.get(anomaly.kind, 0) + 1
        return tally

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "anomaly_counts": self.anomaly_counts(),
            "anomalies": [a.to_dict() for a in self.anomalies],
            "counts": dict(self.counts),
            "recoveries": [r.to_dict() for r in self.recoveries],
            "unseen": list(self.unseen),
            "losses": [w.to_dict() for w in self.losses],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def render(self) -> str:
        """A readable text report."""
        verdict = "VALID" if self.valid else f"INVALID ({len(self.anomalies)} anomalies)"
        c = self.counts
        lines = [
            f"chaos check: {verdict}",
            f"sends: {c.get('sends', 0)} (ok {c.get('sends-ok', 0)}, fail "
            f"{c.get('sends-fail', 0)}, unknown {c.get('sends-info', 0)}: "
            f"{c.get('sends-info-landed', 0)} landed, {c.get('sends-unseen', 0)} unseen)",
            f"polls: {c.get('polls-ok', 0)} ok, {c.get('messages-polled', 0)} messages; "
            f"commits: {c.get('commits-ok', 0)} ok",
            f"replicas: {c.get('replicas', 0)}, {c.get('values-stored', 0)} values stored; "
            f"leader observations: {c.get('leader-observations', 0)}; "
            f"faults: {c.get('faults', 0)}",
        ]
        if self.recoveries:
            lines.append("recovery (fault -> first acknowledged write):")
            for r in self.recoveries:
                at_s = (r.start_ns - self.start_ns) / _NS_PER_S
                targets = ",".join(r.targets) or "-"
                if r.recovery_ms is None:
                    recovered = "no acknowledged write after it"
                else:
                    recovered = f"first acknowledged write {r.recovery_ms:.1f} ms after start"
                    if r.end_ns is None:
                        recovered += ", the fault never ended"
                    elif r.recovery_after_end_ms is not None:
                        recovered += f", {r.recovery_after_end_ms:.1f} ms after end"
                lines.append(f"  {r.name} [{targets}] at +{at_s:.3f} s: {recovered}")
        lines += self._render_losses()
        if self.anomalies:
            lines.append("anomalies:")
            for kind, count in sorted(self.anomaly_counts().items()):
                lines.append(f"  {kind}: {count}")
            for anomaly in self.anomalies:
                lines.append(f"- {anomaly.kind}: {anomaly.details}")
                for ref in anomaly.ops:
                    lines.append(f"    #{ref.index} {_format_op(ref.op, self.start_ns)}")
        return "\n".join(lines)

    def _render_losses(self) -> list[str]:
        if not self.losses:
            return []
        lost = sum(w.lost for w in self.losses)
        longest_s = max(w.window_ms for w in self.losses) / 1000
        lines = [
            f"acknowledged, then lost (counted, not anomalies: the master acknowledges before "
            f"replicating): {lost} writes, {self.counts.get('commits-lost', 0)} commits; "
            f"longest window {longest_s:.2f} s"
        ]
        for w in self.losses:
            if w.fault is None or w.fault_start_ns is None:
                around = "after the last fault"
            else:
                at_s = (w.fault_start_ns - self.start_ns) / _NS_PER_S
                around = f"around {w.fault} [{','.join(w.targets) or '-'}] at +{at_s:.3f} s"
            lines.append(f"  {around}: {w.lost} writes over {w.window_ms / 1000:.2f} s")
        return lines


def _format_op(op: Op, start_ns: int) -> str:
    at_s = (op.time_ns - start_ns) / _NS_PER_S
    return f"+{at_s:.3f}s {op.process} {op.type} {op.f} {op.to_dict()['value']}"


@dataclass(slots=True)
class _ClientOp:
    """A client operation: its invoke and completion (None: still open at the end, which
    counts as unknown outcome)."""

    invoke: OpRef
    completion: OpRef | None = None
    # For polls: the group's committed offset when the poll was invoked.
    committed_floor: int | None = None

    @property
    def outcome(self) -> str:
        return "info" if self.completion is None else self.completion.op.type

    def refs(self) -> tuple[OpRef, ...]:
        return (self.invoke,) if self.completion is None else (self.invoke, self.completion)


@dataclass(slots=True)
class _GroupQueue:
    """A consumer group's progress on one queue, as the polls show it."""

    position: int | None = None  # the next offset the group's last poll leads to expect
    consumed: set[int] = field(default_factory=set)
    committed: int | None = None  # highest offset committed ok so far


def _pair(history: Sequence[Op]) -> tuple[list[_ClientOp], list[OpRef]]:
    """Split the history into client operations (invoke + completion) and events."""
    client_ops: list[_ClientOp] = []
    events: list[OpRef] = []
    open_by_process: dict[str, _ClientOp] = {}
    previous_ns: int | None = None
    for index, op in enumerate(history):
        ref = OpRef(index, op)
        if previous_ns is not None and op.time_ns < previous_ns:
            raise MalformedHistoryError(f"op #{index}: time goes backwards")
        previous_ns = op.time_ns
        if op.f in EVENT_FUNCTIONS:
            events.append(ref)
            continue
        pending = open_by_process.get(op.process)
        if op.type == "invoke":
            if pending is not None:
                raise MalformedHistoryError(
                    f"op #{index}: {op.process} invokes while #{pending.invoke.index} is open"
                )
            client_op = _ClientOp(invoke=ref)
            client_ops.append(client_op)
            open_by_process[op.process] = client_op
            continue
        if pending is None:
            raise MalformedHistoryError(f"op #{index}: a completion without an invoke")
        if pending.invoke.op.f != op.f:
            raise MalformedHistoryError(
                f"op #{index}: completes {op.f} but #{pending.invoke.index} invoked "
                f"{pending.invoke.op.f}"
            )
        pending.completion = ref
        del open_by_process[op.process]
    return client_ops, events


def check(
    history: Sequence[Op],
    replicas: Sequence[ReplicaSnapshot],
    *,
    acknowledged_loss_allowed: bool = False,
) -> Report:
    """Check a history against the replicas' final state (see the module docstring)."""
    client_ops, events = _pair(history)
    sends = [c for c in client_ops if c.invoke.op.f == SEND]
    polls = [c for c in client_ops if c.invoke.op.f == POLL]
    commits = [c for c in client_ops if c.invoke.op.f == COMMIT_OFFSETS]

    sends_by_value: dict[str, _ClientOp] = {}
    for send in sends:
        value = _send_value(send.invoke.op).value
        if value in sends_by_value:
            raise MalformedHistoryError(
                f"op #{send.invoke.index}: value {value!r} already sent by "
                f"#{sends_by_value[value].invoke.index} (values must be unique)"
            )
        sends_by_value[value] = send

    stored_positions, polled_positions, polls_by_value = _positions(replicas, polls)

    anomalies: list[Anomaly] = []
    vanished, misplaced = _lost_writes(sends_by_value, stored_positions, polls_by_value)
    counted = vanished if acknowledged_loss_allowed else {}
    if not acknowledged_loss_allowed:
        anomalies += vanished.values()
    anomalies += misplaced
    anomalies += _unexpected(sends_by_value, stored_positions, polled_positions, polls_by_value)
    anomalies += _duplicates(replicas, polled_positions, sends_by_value, polls_by_value)
    anomalies += _inconsistent_offsets(replicas, polls, forgiven=set(counted))
    order_anomalies, commits_lost = _poll_order(history, client_ops, acknowledged_loss_allowed)
    anomalies += order_anomalies
    anomalies += _multiple_leaders(events)
    anomalies += _disagreeing_logs(replicas)
    recoveries = _recoveries(events, sends)

    unseen = tuple(
        value
        for value, send in sends_by_value.items()
        if send.outcome == "info"
        and value not in stored_positions
        and value not in polled_positions
    )
    counts = _counts(sends, polls, commits, events, replicas, len(unseen), len(stored_positions))
    if acknowledged_loss_allowed:
        counts["acked-lost"] = len(counted)
        counts["commits-lost"] = commits_lost
    lost_ack_ns = {value: anomaly.ops[-1].op.time_ns for value, anomaly in counted.items()}
    return Report(
        anomalies=tuple(anomalies),
        counts=counts,
        recoveries=tuple(recoveries),
        unseen=unseen,
        start_ns=history[0].time_ns if history else 0,
        losses=tuple(loss_windows(lost_ack_ns, recoveries)),
    )


def _positions(
    replicas: Sequence[ReplicaSnapshot], polls: Sequence[_ClientOp]
) -> tuple[dict[str, set[_Position]], dict[str, set[_Position]], dict[str, list[OpRef]]]:
    """Where each value is stored (on any replica), where consumers received it, and the
    polls that received it."""
    stored_positions: dict[str, set[_Position]] = defaultdict(set)
    for replica in replicas:
        for (topic, queue_id), entries in replica.queues.items():
            for offset, value in entries:
                stored_positions[value].add((topic, queue_id, offset))
    polled_positions: dict[str, set[_Position]] = defaultdict(set)
    polls_by_value: dict[str, list[OpRef]] = defaultdict(list)
    for poll in polls:
        if poll.outcome != "ok" or poll.completion is None:
            continue
        poll_value = _poll_value(poll.completion.op)
        for offset, value in poll_value.messages:
            polled_positions[value].add((poll_value.topic, poll_value.queue_id, offset))
            polls_by_value[value].append(poll.completion)
    return stored_positions, polled_positions, polls_by_value


def _counts(
    sends: Sequence[_ClientOp],
    polls: Sequence[_ClientOp],
    commits: Sequence[_ClientOp],
    events: Sequence[OpRef],
    replicas: Sequence[ReplicaSnapshot],
    unseen_count: int,
    values_stored: int,
) -> dict[str, int]:
    """The report's counts: what was attempted, what happened, what was found stored."""
    info_sends = sum(1 for s in sends if s.outcome == "info")
    return {
        "sends": len(sends),
        "sends-ok": sum(1 for s in sends if s.outcome == "ok"),
        "sends-fail": sum(1 for s in sends if s.outcome == "fail"),
        "sends-info": info_sends,
        "sends-info-landed": info_sends - unseen_count,
        "sends-unseen": unseen_count,
        "polls": len(polls),
        "polls-ok": sum(1 for p in polls if p.outcome == "ok"),
        "messages-polled": sum(
            len(_poll_value(p.completion.op).messages)
            for p in polls
            if p.outcome == "ok" and p.completion is not None
        ),
        "commits": len(commits),
        "commits-ok": sum(1 for c in commits if c.outcome == "ok"),
        "faults": sum(1 for e in events if e.op.f == FAULT_START and e.op.type != "fail"),
        "leader-observations": sum(1 for e in events if e.op.f == LEADER_OBSERVED),
        "replicas": len(replicas),
        "values-stored": values_stored,
    }


def _send_value(op: Op) -> SendValue:
    assert isinstance(op.value, SendValue)  # Op checks the value class against f
    return op.value


def _poll_value(op: Op) -> PollValue:
    assert isinstance(op.value, PollValue)
    return op.value


def _format_position(position: _Position) -> str:
    topic, queue_id, offset = position
    return f"{topic}/{queue_id}@{offset}"


def _format_positions(positions: Iterable[_Position]) -> str:
    return ", ".join(_format_position(p) for p in sorted(positions))


def _lost_writes(
    sends_by_value: Mapping[str, _ClientOp],
    stored_positions: Mapping[str, set[_Position]],
    polls_by_value: Mapping[str, list[OpRef]],
) -> tuple[dict[str, Anomaly], list[Anomaly]]:
    """Acknowledged values on no replica ("vanished": value -> its lost-write anomaly, whose
    last op is when it was acknowledged: the ok completion, or the first poll that received
    it), and acknowledged values stored only at other positions than acknowledged."""
    vanished: dict[str, Anomaly] = {}
    misplaced: list[Anomaly] = []
    for value, send in sends_by_value.items():
        if send.outcome != "ok" or send.completion is None:
            continue
        acked = _send_value(send.completion.op)
        if acked.queue_id is None or acked.queue_offset is None:
            raise MalformedHistoryError(
                f"op #{send.completion.index}: an ok send needs its queue_id and queue_offset"
            )
        position = (acked.topic, acked.queue_id, acked.queue_offset)
        found = stored_positions.get(value)
        if not found:
            details = f"{value!r} acknowledged at {_format_position(position)}, on no replica"
            vanished[value] = Anomaly(LOST_WRITE, details, send.refs())
        elif position not in found:
            details = (
                f"{value!r} acknowledged at {_format_position(position)}, stored only at "
                f"{_format_positions(found)}"
            )
            misplaced.append(Anomaly(LOST_WRITE, details, send.refs()))
    # A consumer only ever receives committed messages, so a received value counts as
    # acknowledged even when its send's outcome was unknown.
    for value, poll_refs in polls_by_value.items():
        if value in stored_positions or value in vanished:
            continue
        send_or_none = sends_by_value.get(value)
        send_refs = () if send_or_none is None else send_or_none.refs()
        vanished[value] = Anomaly(
            LOST_WRITE,
            f"{value!r} was received by a consumer, but is on no replica",
            (*send_refs, poll_refs[0]),
        )
    return vanished, misplaced


def _unexpected(
    sends_by_value: Mapping[str, _ClientOp],
    stored_positions: Mapping[str, set[_Position]],
    polled_positions: Mapping[str, set[_Position]],
    polls_by_value: Mapping[str, list[OpRef]],
) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    seen = sorted(set(stored_positions) | set(polled_positions))
    for value in seen:
        send = sends_by_value.get(value)
        where = _format_positions(
            stored_positions.get(value, set()) | polled_positions.get(value, set())
        )
        poll_refs = tuple(polls_by_value.get(value, ())[:1])
        if send is None:
            anomalies.append(Anomaly(UNEXPECTED, f"{value!r} at {where} was never sent", poll_refs))
        elif send.outcome == "fail":
            anomalies.append(
                Anomaly(
                    UNEXPECTED,
                    f"{value!r} at {where}, but its send failed",
                    (*send.refs(), *poll_refs),
                )
            )
    return anomalies


def _duplicates(
    replicas: Sequence[ReplicaSnapshot],
    polled_positions: Mapping[str, set[_Position]],
    sends_by_value: Mapping[str, _ClientOp],
    polls_by_value: Mapping[str, list[OpRef]],
) -> list[Anomaly]:
    # value -> where it is held more than once ("n1: t/0@3, t/0@5", "polls: ...")
    evidence: dict[str, list[str]] = defaultdict(list)
    for replica in replicas:
        positions: dict[str, set[_Position]] = defaultdict(set)
        for (topic, queue_id), entries in replica.queues.items():
            for offset, value in entries:
                positions[value].add((topic, queue_id, offset))
        for value, where in positions.items():
            if len(where) > 1:
                evidence[value].append(f"{replica.node_id}: {_format_positions(where)}")
    for value, where in polled_positions.items():
        if len(where) > 1:
            evidence[value].append(f"polls: {_format_positions(where)}")
    anomalies: list[Anomaly] = []
    for value in sorted(evidence):
        send = sends_by_value.get(value)
        refs = (*(() if send is None else send.refs()), *polls_by_value.get(value, ()))
        details = f"{value!r} stored more than once ({'; '.join(evidence[value])})"
        anomalies.append(Anomaly(DUPLICATE, details, tuple(dict.fromkeys(refs))))
    return anomalies


def _offset_ranges(offsets: Iterable[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3-5, 9"``."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive offsets
    for offset in sorted(offsets):
        if runs and offset == runs[-1][1] + 1:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def _inconsistent_offsets(
    replicas: Sequence[ReplicaSnapshot],
    polls: Sequence[_ClientOp],
    forgiven: Collection[str] = (),
) -> list[Anomaly]:
    """Dense offsets per replica, one value per position. A position where a ``forgiven``
    value (a counted loss) was received and another value is stored now is the loss seen from
    the consumer's side, not another anomaly."""
    anomalies: list[Anomaly] = []
    # Dense: each replica's queue holds every offset between its first and last, once.
    for replica in replicas:
        for (topic, queue_id), entries in sorted(replica.queues.items()):
            offsets = [offset for offset, _ in entries]
            if not offsets:
                continue
            present = set(offsets)
            missing = [o for o in range(min(offsets), max(offsets) + 1) if o not in present]
            repeated = [o for o, n in Counter(offsets).items() if n > 1]
            problems = []
            if missing:
                problems.append(f"missing offsets {_offset_ranges(missing)}")
            if repeated:
                problems.append(f"offsets held twice {_offset_ranges(repeated)}")
            if problems:
                anomalies.append(
                    Anomaly(
                        INCONSISTENT_OFFSETS,
                        f"{replica.node_id} {topic}/{queue_id}: {'; '.join(problems)}",
                    )
                )
    # Agreement: one (queue, offset) holds one value, on every replica and in every poll.
    holders: dict[_Position, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    poll_refs: dict[_Position, list[OpRef]] = defaultdict(list)
    for replica in replicas:
        for (topic, queue_id), entries in replica.queues.items():
            for offset, value in entries:
                holders[(topic, queue_id, offset)][value].append(replica.node_id)
    for poll in polls:
        if poll.outcome != "ok" or poll.completion is None:
            continue
        poll_value = _poll_value(poll.completion.op)
        for offset, value in poll_value.messages:
            position = (poll_value.topic, poll_value.queue_id, offset)
            holders[position][value].append(f"poll #{poll.completion.index}")
            poll_refs[position].append(poll.completion)
    for position in sorted(holders):
        by_value = holders[position]
        if len(set(by_value).difference(forgiven)) > 1:
            held = "; ".join(
                f"{value!r} on {', '.join(dict.fromkeys(sources))}"
                for value, sources in sorted(by_value.items())
            )
            anomalies.append(
                Anomaly(
                    INCONSISTENT_OFFSETS,
                    f"{_format_position(position)} holds different values: {held}",
                    tuple(dict.fromkeys(poll_refs[position])),
                )
            )
    return anomalies


def _poll_order(
    history: Sequence[Op], client_ops: Sequence[_ClientOp], commits_may_be_lost: bool = False
) -> tuple[list[Anomaly], int]:
    """Walk the history in order, following each group's position on each queue. Returns the
    anomalies and, with ``commits_may_be_lost``, how many polls went below a committed offset
    (counted as lost commits instead of reported)."""
    by_completion = {c.completion.index: c for c in client_ops if c.completion is not None}
    by_invoke = {c.invoke.index: c for c in client_ops}
    groups: dict[tuple[str, QueueKey], _GroupQueue] = defaultdict(_GroupQueue)
    anomalies: list[Anomaly] = []
    commits_lost = 0
    for index, op in enumerate(history):
        if op.f == POLL and op.type == "invoke":
            # Only commits acknowledged before the poll began bind it: a commit that
            # completes while the poll is in flight may not have reached the server yet.
            invoked = _poll_value(op)
            key = (invoked.group, (invoked.topic, invoked.queue_id))
            by_invoke[index].committed_floor = groups[key].committed
        elif op.f == COMMIT_OFFSETS and op.type == "ok":
            assert isinstance(op.value, CommitValue)
            state = groups[(op.value.group, (op.value.topic, op.value.queue_id))]
            if state.committed is None or op.value.queue_offset > state.committed:
                state.committed = op.value.queue_offset
        elif op.f == POLL and op.type == "ok":
            poll = by_completion[index]
            found, below_floor = _check_poll(poll, _poll_value(op), groups, commits_may_be_lost)
            anomalies += found
            commits_lost += below_floor
    return anomalies, commits_lost


def _check_poll(
    poll: _ClientOp,
    polled: PollValue,
    groups: dict[tuple[str, QueueKey], _GroupQueue],
    commits_may_be_lost: bool,
) -> tuple[list[Anomaly], int]:
    """The poll's anomalies, and 1 when it went below a committed offset that may have been
    lost (``commits_may_be_lost``: then it is counted, not reported), else 0."""
    state = groups[(polled.group, (polled.topic, polled.queue_id))]
    floor = poll.committed_floor
    offsets = [offset for offset, _ in polled.messages]
    queue = f"group {polled.group!r} on {polled.topic}/{polled.queue_id}"
    anomalies: list[Anomaly] = []

    backwards: list[str] = []
    below_floor = [o for o in offsets if floor is not None and o < floor]
    if below_floor and not commits_may_be_lost:
        backwards.append(f"received {_offset_ranges(below_floor)} below committed offset {floor}")
    if any(later <= earlier for earlier, later in itertools.pairwise(offsets)):
        backwards.append(f"offsets out of order in one poll: {offsets}")
    if backwards:
        anomalies.append(
            Anomaly(NONMONOTONIC_POLL, f"{queue}: {'; '.join(backwards)}", poll.refs())
        )

    # The next offset the group should receive: after its last poll, or, before any poll,
    # its committed offset (a group resumes there). Offsets below the committed one count
    # as consumed, since the group declared them so.
    expected = state.position if state.position is not None else floor
    skipped: list[int] = []
    for offset in offsets:
        if expected is not None and offset > expected:
            skipped += [
                o
                for o in range(expected, offset)
                if o not in state.consumed and (floor is None or o >= floor)
            ]
        state.consumed.add(offset)
        # A step back (a re-delivery from the committed offset) restarts the position there.
        expected = offset + 1
    if offsets:
        state.position = expected
    if skipped:
        anomalies.append(
            Anomaly(
                POLL_SKIP,
                f"{queue}: skipped {_offset_ranges(skipped)}, never consumed",
                poll.refs(),
            )
        )
    return anomalies, int(bool(below_floor) and commits_may_be_lost)


def _multiple_leaders(events: Sequence[OpRef]) -> list[Anomaly]:
    leaders_by_term: dict[int, dict[str, OpRef]] = defaultdict(dict)
    for ref in events:
        if ref.op.f != LEADER_OBSERVED or ref.op.type == "fail":
            continue
        assert isinstance(ref.op.value, LeaderValue)
        leaders_by_term[ref.op.value.term].setdefault(ref.op.value.node_id, ref)
    return [
        Anomaly(
            MULTIPLE_LEADERS,
            f"term {term} has leaders {', '.join(sorted(leaders))}",
            tuple(leaders.values()),
        )
        for term, leaders in sorted(leaders_by_term.items())
        if len(leaders) > 1
    ]


def _disagreeing_logs(replicas: Sequence[ReplicaSnapshot]) -> list[Anomaly]:
    digests = {r.node_id: r for r in replicas if r.commitlog_digest is not None}
    if len({r.commitlog_digest for r in digests.values()}) <= 1:
        return []
    held = "; ".join(
        f"{node_id}: {str(r.commitlog_digest)[:16]} ({r.commitlog_bytes} bytes)"
        for node_id, r in sorted(digests.items())
    )
    return [Anomaly(COMMITTED_LOGS_DISAGREE, f"committed CommitLog digests differ: {held}")]


def _recoveries(events: Sequence[OpRef], sends: Sequence[_ClientOp]) -> list[FaultRecovery]:
    # Acknowledged sends by invoke index, with the earliest acknowledgement among all sends
    # invoked at or after each one (suffix minimum), so each fault needs one bisect.
    acked = sorted(
        (s.invoke.index, s.completion.op.time_ns)
        for s in sends
        if s.outcome == "ok" and s.completion is not None
    )
    invoke_indexes = [index for index, _ in acked]
    earliest_ack_ns: list[int] = [0] * len(acked)
    running: int | None = None
    for position in range(len(acked) - 1, -1, -1):
        ack_ns = acked[position][1]
        running = ack_ns if running is None else min(running, ack_ns)
        earliest_ack_ns[position] = running

    def first_ack_ms_after(ref: OpRef) -> float | None:
        position = bisect.bisect_right(invoke_indexes, ref.index)
        if position == len(acked):
            return None
        return (earliest_ack_ns[position] - ref.op.time_ns) / _NS_PER_MS

    starts: list[OpRef] = []
    ends: dict[int, OpRef] = {}  # start index -> its end
    open_starts: dict[str, list[OpRef]] = defaultdict(list)
    for ref in events:
        if ref.op.type == "fail" or ref.op.f not in (FAULT_START, FAULT_END):
            continue
        assert isinstance(ref.op.value, FaultValue)
        if ref.op.f == FAULT_START:
            starts.append(ref)
            open_starts[ref.op.value.name].append(ref)
        elif open_starts[ref.op.value.name]:
            # The oldest open fault of that name ends: faults of one name heal in order.
            ends[open_starts[ref.op.value.name].pop(0).index] = ref
    recoveries: list[FaultRecovery] = []
    for start in starts:
        assert isinstance(start.op.value, FaultValue)
        end = ends.get(start.index)
        recoveries.append(
            FaultRecovery(
                name=start.op.value.name,
                targets=start.op.value.targets,
                start_index=start.index,
                start_ns=start.op.time_ns,
                end_index=None if end is None else end.index,
                end_ns=None if end is None else end.op.time_ns,
                recovery_ms=first_ack_ms_after(start),
                recovery_after_end_ms=None if end is None else first_ack_ms_after(end),
            )
        )
    return recoveries
