"""TransactionTable: what the Raft leader knows of transactions in one term -- which half
messages are decided, how often each undecided one was checked and when -- derived from the
half and op topics' records alone (node/messaging/transaction.py says what they hold).

Why derived from the records, not kept by every replica from control records: the records are
the CommitLog, which a snapshot carries, and retention deletes an op record only after the
half it names (it lies further back), so a member that installed a snapshot, restarted or was
just elected finds every decision of every retained half where it finds the half. The two
watermarks below are consumer offsets (group ``TRANSACTION_GROUP``), which a snapshot's
control state carries too.

State: ``half_low`` (every half below it is decided, or deleted by retention) and ``op_low``
(every op record below it names a half below ``half_low``): a new leader reads the op topic
from ``op_low`` and the half topic from ``half_low``, not from the start. Above them: the
decision of each decided half, the check count and last check time of each checked one, and
the undecided halves themselves (``HalfMessage``), in queue-offset order.

Rules this module keeps:
- The first decision read for a half is its decision (the coordinator never proposes a
  second one; a second one would be ignored, never applied over the first).
- Records are added in queue-offset order, each once (``op_scanned_to``,
  ``half_scanned_to``); offsets retention deleted are skipped (``skip_*_to``).
- Watermarks only move up, and only over decided halves (``advance``), so a watermark
  written to the log is never above an undecided half.
- Pure and single-threaded: the coordinator serialises access and brings the records.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from raftlog.node.messaging.transaction import OP_CHECK, HalfMessage, OpRecord

DEFAULT_TRANSACTION_TIMEOUT_MS = 6_000  # RocketMQ's transactionTimeOut
DEFAULT_TRANSACTION_CHECK_INTERVAL_MS = 60_000  # RocketMQ's transactionCheckInterval
DEFAULT_TRANSACTION_CHECK_MAX = 15  # RocketMQ's transactionCheckMax


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    """The node's check-back settings (node/config.py builds them)."""

    timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    check_interval_ms: int = DEFAULT_TRANSACTION_CHECK_INTERVAL_MS
    check_max: int = DEFAULT_TRANSACTION_CHECK_MAX


@dataclass(frozen=True, slots=True)
class DueWork:
    """What a check-back turn does: check each of ``checks`` (with its check number), roll
    back each of ``rollbacks`` (checked ``check_max`` times already, or malformed)."""

    checks: list[tuple[HalfMessage, int]] = field(default_factory=list)
    rollbacks: list[HalfMessage] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.checks or self.rollbacks)


class TransactionTable:
    """One term's view (see the module docstring)."""

    def __init__(self, term: int, half_low: int, op_low: int) -> None:
        self.term = term
        self.half_low = half_low
        self.op_low = op_low
        self.half_scanned_to = half_low
        self.op_scanned_to = op_low
        self._decided: dict[int, str] = {}
        # half queue offset -> (checks so far, store time of the last check, ms)
        self._checks: dict[int, tuple[int, int]] = {}
        # half queue offset -> the op offset of its first op record (for op_low)
        self._first_op: dict[int, int] = {}
        self._undecided: dict[int, HalfMessage] = {}

    # ------------------------------------------------------------------ reading records

    def skip_ops_to(self, op_offset: int) -> None:
        """Op records below ``op_offset`` were deleted by retention."""
        self.op_scanned_to = max(self.op_scanned_to, op_offset)

    def skip_halves_to(self, half_offset: int) -> None:
        """Halves below ``half_offset`` were deleted by retention: nothing to decide there."""
        if half_offset > self.half_scanned_to:
            self.half_scanned_to = half_offset
        if half_offset > self.half_low:
            self.half_low = half_offset
            self._prune()

    def add_op(self, op_offset: int, op: OpRecord | None) -> None:
        """The op record at ``op_offset`` (None: one no leader wrote, skipped)."""
        if op_offset != self.op_scanned_to:
            raise ValueError(f"op offset {op_offset} is not the next one, {self.op_scanned_to}")
        self.op_scanned_to += 1
        if op is None or op.half_queue_offset < self.half_low:
            return
        half = op.half_queue_offset
        self._first_op.setdefault(half, op_offset)
        if op.kind == OP_CHECK:
            times, _ = self._checks.get(half, (0, 0))
            if op.check_times >= times:
                self._checks[half] = (op.check_times, op.store_timestamp_ms)
        elif half not in self._decided:
            self._decided[half] = op.kind
            self._undecided.pop(half, None)

    def add_half(self, half: HalfMessage) -> None:
        """The next half message of the half queue."""
        if half.queue_offset != self.half_scanned_to:
            raise ValueError(
                f"half offset {half.queue_offset} is not the next one, {self.half_scanned_to}"
            )
        self.half_scanned_to += 1
        if half.queue_offset not in self._decided:
            self._undecided[half.queue_offset] = half

    # ------------------------------------------------------------------ answers

    def decision(self, half_offset: int) -> str | None:
        """``commit`` or ``rollback`` for a decided half at or above ``half_low``; None for
        an undecided one (below ``half_low``: ask the op records, coordinator)."""
        return self._decided.get(half_offset)

    def undecided_count(self) -> int:
        return len(self._undecided)

    def check_times(self, half_offset: int) -> int:
        return self._checks.get(half_offset, (0, 0))[0]

    def due(
        self,
        now_ms: int,
        settings: TransactionSettings,
        limit: int,
        busy: Container[int] = (),
    ) -> DueWork:
        """The undecided halves to check or roll back now, at most ``limit``, oldest first;
        those in ``busy`` (a decision in flight) are left alone. Halves are looked at in
        queue-offset order up to the first one younger than the timeout (store times follow
        queue offsets, but for clock differences between leaders)."""
        work = DueWork()
        for offset, half in self._undecided.items():
            if len(work.checks) + len(work.rollbacks) >= limit:
                break
            if now_ms - half.store_timestamp_ms < settings.timeout_ms:
                break
            if offset in busy:
                continue
            times, last_ms = self._checks.get(offset, (0, 0))
            if times and now_ms - last_ms < settings.check_interval_ms:
                continue
            if times >= settings.check_max or not half.valid:
                work.rollbacks.append(half)
            else:
                work.checks.append((half, times + 1))
        return work

    # ------------------------------------------------------------------ watermarks

    def advance(self) -> bool:
        """Move ``half_low`` over the decided halves above it and ``op_low`` with it; True
        when either moved."""
        before = (self.half_low, self.op_low)
        low = self.half_low
        while low < self.half_scanned_to and low in self._decided:
            low += 1
        self.half_low = low
        self._prune()
        self.op_low = max(self.op_low, min(self._first_op.values(), default=self.op_scanned_to))
        return (self.half_low, self.op_low) != before

    def _prune(self) -> None:
        low = self.half_low
        for table in (self._decided, self._checks, self._first_op, self._undecided):
            for offset in [o for o in table if o < low]:
                del table[offset]
