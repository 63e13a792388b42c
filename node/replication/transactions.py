"""TransactionCoordinator: the Raft leader's half of transactional messages -- it decides each
transaction once (Producer.EndTransaction) and checks back the ones left undecided
(Producer.TransactionChecks), like RocketMQ's EndTransactionProcessor and
TransactionalMessageCheckService, but safe across leader changes (docs/messaging.md
"Transactions"; node/messaging/transaction.py says what the records hold).

A decision is ONE Raft entry: the op record naming the half, and for a commit the message
for the real topic, so every replica applies both or neither. What is decided comes from the
records alone (node/messaging/transaction_table.py): at its first call in a term the leader
reads the op and half topics from the replicated watermarks on, and before every decision it
reads what was applied since, so its table shows every committed decision.

The check-back turn (every 250 ms, on the leader once it is write-ready): the undecided
halves older than ``transaction_timeout_ms`` whose last check is ``transaction_check_interval_ms``
old get a check op record each (the count is replicated, so a new leader continues it), in
one entry; once that entry is applied, each check goes to a live stream of the half's group
(node/messaging/transaction_checkers.py). A half checked ``transaction_check_max`` times is
rolled back by the next turn due. The watermarks are written as the group
``TRANSACTION_GROUP``'s offsets when they moved (at most once a second).

Rules this module keeps:
- One decision per half: a decision is proposed only when the table, read after every
  applied entry, shows none, and no decision for that half is in flight (``_pending``); one
  whose outcome is unknown stays in flight until its log index is applied (its own entry or
  a replacement), and the next request reads the outcome from the store.
- Every entry is proposed for the term its decision was made in (``required_term``), so a
  member that lost leadership and won it back decides again on what its successors wrote.
- The check-back has at most one entry in flight and proposes nothing while an earlier
  one's outcome is unknown; a check is sent only after its op record is committed, so a
  half is never checked more than ``transaction_check_max`` times, across failovers too.
- Raft mode only; the half and op topics are created locally on every member at start (as
  the schedule topic is), so they exist on every replica.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Sequence

from raftlog.node.control import CommitOffsets, control_message
from raftlog.node.errors import NodeError, NotLeaderError, UnknownOutcomeError
from raftlog.node.messaging.transaction import (
    DECISIONS,
    HALF_TOPIC,
    OP_CHECK,
    OP_COMMIT,
    OP_ROLLBACK,
    OP_TOPIC,
    TRANSACTION_GROUP,
    TRANSACTION_QUEUE_COUNT,
    TRANSACTION_QUEUE_ID,
    HalfMessage,
    committed_message,
    half_named,
    half_of,
    op_message,
    op_of,
)
from raftlog.node.messaging.transaction_checkers import CheckerRegistry, CheckRequest
from raftlog.node.messaging.transaction_table import (
    DueWork,
    TransactionSettings,
    TransactionTable,
)
from raftlog.node.replication.proposals import Proposal
from raftlog.node.replication.replica import Replica
from raftlog.node.transaction_path import EndOutcome, EndTransaction
from raftlog.node.write_checks import check_offsets
from raftlog.node.write_path import ProduceOutcome
from raftlog.store.errors import StoreError
from raftlog.store.message_store import Message

_log = logging.getLogger(__name__)

TURN_INTERVAL_S = 0.25
_LOOP_TIMEOUT_S = 2.0
_UNITS_PER_READ = 1024
_MAX_DUE_PER_TURN = 256
# How long a turn waits for its entry to apply; past that its outcome is unknown, and the
# turn proposes nothing until the entry's index is applied.
_ENTRY_WAIT_S = 5.0
_WATERMARK_EVERY_S = 1.0
# A new leader takes decisions once it applied its inherited log: about one round trip.
_LEADER_WAIT_S = 2.0
_LEADER_POLL_S = 0.02
# A request waits for at most this many earlier decisions of its half in flight.
_MAX_WAITS = 8
_OP_LOOKUP_RESULTS = 64


class TransactionCoordinator:
    """Decides and checks back the transactions of one Raft member (idle unless it leads)."""

    def __init__(
        self,
        replica: Replica,
        settings: TransactionSettings,
        checkers: CheckerRegistry | None = None,
    ) -> None:
        self._replica = replica
        self._store = replica.store
        self._settings = settings
        self._checkers = checkers if checkers is not None else CheckerRegistry()
        for topic in (HALF_TOPIC, OP_TOPIC):
            self._store.create_topic(topic, TRANSACTION_QUEUE_COUNT)
        self._lock = threading.Lock()
        self._table: TransactionTable | None = None
        # half queue offset -> the proposal deciding it, while its outcome is not known
        self._pending: dict[int, Proposal] = {}
        self._turn_pending: Proposal | None = None
        self._written_lows = (0, 0)
        self._lows_written_at_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="transaction-check", daemon=True)
        self.checked_count = 0
        self.rolled_back_count = 0

    @property
    def checkers(self) -> CheckerRegistry:
        return self._checkers

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(_ENTRY_WAIT_S + _LOOP_TIMEOUT_S)

    # ------------------------------------------------------------------ EndTransaction

    def end_transaction(self, request: EndTransaction, *, timeout_s: float) -> EndOutcome:
        deadline_s = time.monotonic() + timeout_s
        term = self._await_leader_term(min(timeout_s, _LEADER_WAIT_S))
        record = self._store.get_by_message_id(request.msg_id)
        half = half_named(
            record, request.msg_id, request.transaction_id, request.producer_group, request.topic
        )
        if request.commit:
            check_offsets(self._store, [(half.real_topic, half.real_queue_id, 0)])
        kind = OP_COMMIT if request.commit else OP_ROLLBACK
        claimed = self._claim(half, kind, term, deadline_s)
        if isinstance(claimed, EndOutcome):
            return claimed
        proposal, copy_index = claimed
        try:
            outcome = proposal.future.result(timeout=max(0.0, deadline_s - time.monotonic()))
        except concurrent.futures.TimeoutError:
            raise UnknownOutcomeError(
                "the decision was proposed but not committed in time; it may still commit: "
                "end the transaction again (it is decided once)"
            ) from None
        assert isinstance(outcome, ProduceOutcome)
        result = outcome.results[copy_index] if copy_index is not None else None
        return EndOutcome(request.commit, False, result, half.real_queue_id)

    def _claim(
        self, half: HalfMessage, kind: str, term: int, deadline_s: float
    ) -> EndOutcome | tuple[Proposal, int | None]:
        """The recorded decision of ``half`` (a duplicate), or the proposal of ``kind`` made
        for it now and where its committed message lies in the entry. Waits (bounded) for a
        decision of the same half already in flight."""
        offset = half.queue_offset
        for _ in range(_MAX_WAITS):
            with self._lock:
                table = self._catch_up(term)
                if offset < table.half_low:
                    return self._decided_below(offset)
                decided = table.decision(offset)
                if decided is not None:
                    return EndOutcome(decided == OP_COMMIT, True)
                waiting = self._pending.get(offset)
                if waiting is None:
                    proposal, copies = self._propose(term, [(half, kind)], [])
                    return proposal, copies.get(offset)
            try:
                waiting.future.exception(timeout=max(0.0, deadline_s - time.monotonic()))
            except concurrent.futures.TimeoutError:
                raise UnknownOutcomeError(
                    "an earlier decision of this transaction is in flight; its outcome is "
                    "not known yet: end the transaction again"
                ) from None
        raise UnknownOutcomeError("decisions of this transaction keep replacing each other")

    def _decided_below(self, half_offset: int) -> EndOutcome:
        """A half below the watermark is decided: its decision, found by its op records'
        key (IndexFile), or unknown when they are gone."""
        records = self._store.query_by_key(
            OP_TOPIC, str(half_offset), max_results=_OP_LOOKUP_RESULTS
        )
        for record in sorted(records, key=lambda r: r.physical_offset):
            op = op_of(record)
            if op is not None and op.half_queue_offset == half_offset and op.kind in DECISIONS:
                return EndOutcome(op.kind == OP_COMMIT, True)
        return EndOutcome(False, True, decision_known=False)

    # ------------------------------------------------------------------ the table

    def _catch_up(self, term: int) -> TransactionTable:
        """The table of ``term``, built when the term is new, with every applied record read
        (call with the lock held)."""
        self._pending = {h: p for h, p in self._pending.items() if not p.future.done()}
        table = self._table
        if table is None or table.term != term:
            lows = (self._stored_low(HALF_TOPIC), self._stored_low(OP_TOPIC))
            table = self._table = TransactionTable(term, *lows)
            self._written_lows = lows
        self._scan(table, OP_TOPIC)
        self._scan(table, HALF_TOPIC)
        table.advance()
        return table

    def _stored_low(self, topic: str) -> int:
        stored = self._store.fetch_consumer_offset(TRANSACTION_GROUP, topic, TRANSACTION_QUEUE_ID)
        return stored or 0

    def _scan(self, table: TransactionTable, topic: str) -> None:
        """Add the records of ``topic`` dispatched since the table last read it."""
        store = self._store
        first = store.min_queue_offset(topic, TRANSACTION_QUEUE_ID)
        if topic == OP_TOPIC:
            table.skip_ops_to(first)
        else:
            table.skip_halves_to(first)
        end = store.max_queue_offset(topic, TRANSACTION_QUEUE_ID)
        while True:
            start = table.op_scanned_to if topic == OP_TOPIC else table.half_scanned_to
            if start >= end:
                return
            units = store.read_units(
                topic, TRANSACTION_QUEUE_ID, start, min(_UNITS_PER_READ, end - start)
            )
            if not units:
                return
            records = store.commit_log.read_records([(unit[0], unit[1]) for unit in units])
            for index, record in enumerate(records):
                if topic == OP_TOPIC:
                    table.add_op(start + index, op_of(record))
                else:
                    table.add_half(half_of(record))

    def _propose(
        self,
        term: int,
        decisions: Sequence[tuple[HalfMessage, str]],
        checks: Sequence[tuple[HalfMessage, int]],
    ) -> tuple[Proposal, dict[int, int]]:
        """Submit one entry: the op record of each decision (a commit's message right after
        it) and of each check. Returns it and where each committed message lies in it. Call
        with the lock held."""
        messages: list[Message] = []
        copies: dict[int, int] = {}
        for half, kind in decisions:
            messages.append(op_message(half.queue_offset, kind))
            if kind == OP_COMMIT:
                record = self._store.commit_log.read_record(half.physical_offset)
                copies[half.queue_offset] = len(messages)
                messages.append(committed_message(record, half))
        for half, times in checks:
            messages.append(op_message(half.queue_offset, OP_CHECK, times))
        block, entries = self._store.encode_messages(messages)
        proposal = Proposal(block, entries, required_term=term)
        self._replica.submit(proposal)
        for half, _ in decisions:
            self._pending[half.queue_offset] = proposal
        return proposal, copies

    # ------------------------------------------------------------------ leadership

    def _leader_term(self) -> int | None:
        """This member's term when it leads and takes writes, else None."""
        return self._replica.leading_term(_LOOP_TIMEOUT_S)

    def _await_leader_term(self, wait_s: float) -> int:
        """The term this member leads in; NotLeaderError naming the leader when another one
        leads, or when this one is not write-ready within ``wait_s``."""
        deadline_s = time.monotonic() + wait_s
        own_id = self._replica.settings.node_id
        while True:
            term = self._leader_term()
            if term is not None:
                return term
            view = self._replica.view
            leader = view.leader_id if view.leader_id != own_id else None
            if leader is not None or time.monotonic() >= deadline_s:
                raise NotLeaderError(leader, view.leader_address if leader else None, view.term)
            time.sleep(_LEADER_POLL_S)

    # ------------------------------------------------------------------ the check-back turn

    def _run(self) -> None:
        while not self._stop.wait(TURN_INTERVAL_S):
            try:
                self._turn()
            except (NodeError, StoreError, TimeoutError) as error:
                _log.warning("transaction check-back: %s; trying again", error)
                self._forget()
            except Exception:  # a bug must not end the check-back for good: log and go on
                _log.exception("transaction check-back turn failed")
                self._forget()

    def _forget(self) -> None:
        with self._lock:
            self._table = None

    def _turn(self) -> None:
        pending = self._turn_pending
        if pending is not None:
            if not pending.future.done():
                return
            self._turn_pending = None
        term = self._leader_term()
        if term is None:
            self._forget()
            return
        now_ms = time.time_ns() // 1_000_000
        with self._lock:
            table = self._catch_up(term)
            work = table.due(now_ms, self._settings, _MAX_DUE_PER_TURN, busy=self._pending)
            proposal = None
            if work:
                decisions = [(half, OP_ROLLBACK) for half in work.rollbacks]
                proposal, _ = self._propose(term, decisions, work.checks)
            lows = (table.half_low, table.op_low)
        if proposal is not None and self._await(proposal):
            self._checked(work)
        since_s = time.monotonic() - self._lows_written_at_s
        if lows != self._written_lows and since_s >= _WATERMARK_EVERY_S:
            self._write_lows(term, lows)

    def _await(self, proposal: Proposal) -> bool:
        """Wait (bounded) for a turn's entry; True once it is committed and applied."""
        self._turn_pending = proposal
        try:
            proposal.future.result(timeout=_ENTRY_WAIT_S)
        except concurrent.futures.TimeoutError:
            _log.warning("transaction check-back: an entry's outcome is unknown; waiting for it")
            return False
        except (NodeError, StoreError) as error:
            _log.info("transaction check-back: entry not made (%s); deciding again", error)
            self._turn_pending = None
            return False
        self._turn_pending = None
        return True

    def _checked(self, work: DueWork) -> None:
        """The check op records of ``work`` are committed: send the checks."""
        if work.rollbacks:
            self.rolled_back_count += len(work.rollbacks)
            _log.warning(
                "rolled back %d transactions checked %d times without an answer (first: "
                "half offset %d, group %r)",
                len(work.rollbacks),
                self._settings.check_max,
                work.rollbacks[0].queue_offset,
                work.rollbacks[0].producer_group,
            )
        for half, times in work.checks:
            record = self._store.commit_log.read_record(half.physical_offset)
            self.checked_count += 1
            if not self._checkers.offer(CheckRequest(record, half, times)):
                _log.debug(
                    "no producer of group %r takes checks of %s now (check %d of half %d)",
                    half.producer_group,
                    half.real_topic,
                    times,
                    half.queue_offset,
                )

    def _write_lows(self, term: int, lows: tuple[int, int]) -> None:
        """Record the watermarks (computed from applied decisions only) as offsets."""
        half_low, op_low = lows
        command = CommitOffsets(
            TRANSACTION_GROUP,
            (
                (HALF_TOPIC, TRANSACTION_QUEUE_ID, half_low),
                (OP_TOPIC, TRANSACTION_QUEUE_ID, op_low),
            ),
        )
        block, entries = self._store.encode_messages([control_message(command)])
        proposal = Proposal(block, entries, control=command, required_term=term)
        self._replica.submit(proposal)
        self._lows_written_at_s = time.monotonic()
        if self._await(proposal):
            self._written_lows = lows
