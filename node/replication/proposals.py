"""Proposals: a leader's writes from the moment they reach the Raft loop until they are answered
-- admission (the idempotent producer's sequences), batching, stamping, proposing, and the
answer once their entry is applied or replaced.

A write arrives encoded (store.encode_messages on the gRPC thread) and waits in ``queued``.
Each loop turn proposes everything queued as one batch of entries (``propose_batch``): each
proposal's position in the CommitLog is reserved (``plan_entry``) and its records are stamped
with queue offsets, physical offsets and the store time (``stamp_block``), so followers store
the same bytes at the same offsets.

Rules this module keeps:
- Called on the Raft loop only, and only when no unpersisted entry exists (after the turn's
  Ready), so a reservation counts every entry ahead of it.
- A new leader proposes nothing until it applied its first entry of its term (the caller says
  so with ``write_ready``); what arrives before waits in ``deferred``.
- A leader whose disk refused its last Ready's entries (ready.py) refuses every write with
  DiskFullError (RESOURCE_EXHAUSTED) until an append succeeds again: nothing is proposed.
- A write whose proposal was not made when its caller gave up is dropped (the future was
  cancelled: the retry is safe); one that was proposed is answered when its index is applied:
  with its outcome when the entry there is its own, else "unknown outcome" (replaced).
- An idempotent batch carries a ProduceMarker record first; a duplicate is answered with the
  original's outcome (read back from the log), a gap with SequenceGapError, and a duplicate of
  a batch still in flight waits for it. A producer's sequence counts as pending from the
  moment it is admitted, so several of its batches in one turn are admitted in order.
- An "early" batch (its producer's predecessors not admitted yet: a client with several
  requests in flight, each encoded on its own gRPC thread, may reach the loop out of order)
  waits unproposed in ``early`` until its predecessor is admitted (then it goes right after
  it) or ``EARLY_WAIT_MS`` pass (then it is a gap, nothing written). At most
  ``MAX_EARLY_PROPOSALS`` wait; beyond that an early batch is a gap at once.
- The store time comes from the caller (``now_ms``): the Raft loop passes the wall clock, the
  simulation its simulated clock.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from raftlog.node.control import (
    CONTROL_TOPIC,
    ControlCommand,
    ProduceMarker,
    control_message,
)
from raftlog.node.errors import (
    NodeError,
    OverloadedError,
    SequenceForgottenError,
    SequenceGapError,
    UnknownOutcomeError,
)
from raftlog.node.replication.producer_table import ProducerTable
from raftlog.node.replication.raft_entry import ENTRY_HEADER_SIZE_BYTES
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.write_path import ProduceOutcome
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import Entry, ProposalDroppedError, Role
from raftlog.store.errors import DiskFullError
from raftlog.store.message_id import encode_message_id
from raftlog.store.message_store import BlockEntry, MessageStore, PutResult
from raftlog.store.record import decode_record

# How long an early idempotent batch waits for its predecessors before it is a gap.
EARLY_WAIT_MS = 500
# Bounds the gRPC threads early batches may hold (a client cannot pin more than this).
MAX_EARLY_PROPOSALS = 256


@dataclass(slots=True)
class Proposal:
    """A write waiting in the inbox, then in the log. ``future`` resolves with the value the
    caller returns (or the error it raises)."""

    block: bytearray
    entries: list[BlockEntry]
    control: ControlCommand | None = None
    producer_id: str = ""
    sequence: int = 0
    future: concurrent.futures.Future[object] = field(default_factory=concurrent.futures.Future)
    results: list[PutResult] = field(default_factory=list)
    store_timestamp_ms: int = 0
    index: int = 0
    term: int = 0
    followers: list[Proposal] = field(default_factory=list)
    # Producer-encoded records: the leader stamps its store host into them too.
    encoded: bool = False
    # Proposed only in this term (0: any): the delay scheduler decided on the state of one
    # term, which another term's leader may have changed since.
    required_term: int = 0


class Proposals:
    """The proposals of one member, between its inbox and the applied log."""

    def __init__(
        self,
        node: RawNode,
        raft_log: RaftLogStorage,
        store: MessageStore,
        producers: ProducerTable,
        not_leader: Callable[[], NodeError],
    ) -> None:
        self._node = node
        self._raft_log = raft_log
        self._store = store
        self._producers = producers
        self._not_leader = not_leader
        self.queued: list[Proposal] = []
        self.deferred: list[Proposal] = []
        self._inflight: dict[int, Proposal] = {}
        self._waiting_by_sequence: dict[tuple[str, int], Proposal] = {}
        # (producer id, sequence) -> the early batch and when it stops waiting (ms).
        self.early: dict[tuple[str, int], tuple[Proposal, int]] = {}

    # ------------------------------------------------------------------ proposing

    def propose_queued(
        self, write_ready: bool, now_ms: int, disk_full: DiskFullError | None = None
    ) -> None:
        """Propose every queued write as one batch (see the module docstring). ``disk_full``:
        this leader's last Ready could not write its entries; the writes are refused. Also
        ends the wait of early batches whose time is up (call it while ``early`` is not
        empty, even with nothing queued)."""
        queued, self.queued = self.queued, []
        if self._node.role is not Role.LEADER:
            self.fail_unproposed(queued)
            self._fail_early(self._not_leader())
            return
        if disk_full is not None:
            refusal = DiskFullError(
                f"write refused, nothing written: this leader cannot write its log ({disk_full})"
            )
            for proposal in queued:
                if proposal.future.set_running_or_notify_cancel():
                    proposal.future.set_exception(refusal)
            self._fail_early(refusal)
            return
        if not write_ready:
            self.deferred.extend(queued)
            return
        batch: list[Proposal] = []
        saved_pending: dict[str, int | None] = {}
        for proposal in queued:
            if not proposal.future.set_running_or_notify_cancel():
                continue  # the caller gave up before it was proposed
            if proposal.required_term and proposal.required_term != self._node.term:
                proposal.future.set_exception(self._not_leader())
                continue
            if proposal.producer_id and not self._admit_sequence(proposal, now_ms):
                continue
            self._add(proposal, batch, saved_pending, now_ms)
        self._expire_early(now_ms)
        if batch:
            self._propose(batch, saved_pending)

    def _add(
        self,
        proposal: Proposal,
        batch: list[Proposal],
        saved_pending: dict[str, int | None],
        now_ms: int,
    ) -> None:
        """Stamp an admitted write into ``batch``; an idempotent one's sequence is pending
        from now on, and the early batch that follows it (if one waits) comes right after."""
        while True:
            producer_id = proposal.producer_id
            if producer_id:
                if producer_id not in saved_pending:
                    saved_pending[producer_id] = self._producers.pending(producer_id)
                self._producers.propose(producer_id, proposal.sequence)
                self._waiting_by_sequence[(producer_id, proposal.sequence)] = proposal
            self._stamp(proposal, now_ms)
            batch.append(proposal)
            if not producer_id:
                return
            successor = self.early.pop((producer_id, proposal.sequence + 1), None)
            if successor is None:
                return
            proposal = successor[0]

    def release_deferred(self) -> None:
        """The leader became write-ready: what waited goes first."""
        self.queued = self.deferred + self.queued
        self.deferred = []

    def _propose(self, batch: list[Proposal], saved_pending: dict[str, int | None]) -> None:
        try:
            last_index = self._node.propose_batch([bytes(p.block) for p in batch])
        except ProposalDroppedError as error:
            self._raft_log.cancel_plans()
            self._store.reload_next_queue_offsets()
            self._producers.restore_pending(saved_pending)
            refusal = OverloadedError(f"write refused: {error}")
            for proposal in batch:
                if proposal.producer_id:
                    self._waiting_by_sequence.pop((proposal.producer_id, proposal.sequence), None)
                _resolve(proposal, None, refusal)
            return
        term = self._node.term
        for index, proposal in enumerate(batch, last_index - len(batch) + 1):
            proposal.index, proposal.term = index, term
            self._inflight[index] = proposal

    def _admit_sequence(self, proposal: Proposal, now_ms: int) -> bool:
        """Idempotent producer: True when the batch is to be stored now; otherwise the
        proposal's future is answered here (duplicate, gap, or chained to the in-flight
        original), or it waits in ``early``."""
        key = (proposal.producer_id, proposal.sequence)
        verdict = self._producers.check(*key)
        if verdict.action == "store":
            return True
        if verdict.action == "early" and len(self.early) < MAX_EARLY_PROPOSALS:
            replaced = self.early.pop(key, None)
            if replaced is not None:  # a resend of a batch already waiting: the newer waits
                replaced[0].future.set_exception(_gap(*key))
            self.early[key] = (proposal, now_ms + EARLY_WAIT_MS)
        elif verdict.action in ("gap", "early"):
            proposal.future.set_exception(_gap(*key))
        elif verdict.action == "wait" and key in self._waiting_by_sequence:
            self._waiting_by_sequence[key].followers.append(proposal)
        elif verdict.entry is not None:
            proposal.future.set_result(self._stored_outcome(*verdict.entry))
        else:
            proposal.future.set_exception(
                SequenceForgottenError(
                    f"sequence {proposal.sequence} of producer {proposal.producer_id!r} was "
                    "stored once; its offsets are no longer remembered"
                )
            )
        return False

    def _expire_early(self, now_ms: int) -> None:
        """Early batches whose predecessors did not come in time: gaps, nothing written."""
        for key in [k for k, (_, until_ms) in self.early.items() if until_ms <= now_ms]:
            proposal, _ = self.early.pop(key)
            proposal.future.set_exception(_gap(*key))

    def _fail_early(self, error: Exception) -> None:
        early, self.early = self.early, {}
        for proposal, _ in early.values():
            proposal.future.set_exception(error)

    def _stamp(self, proposal: Proposal, now_ms: int) -> None:
        block = proposal.block
        if proposal.producer_id:
            marker_block, marker_entries = self._store.encode_messages(
                [control_message(ProduceMarker(proposal.producer_id, proposal.sequence))]
            )
            block = proposal.block = marker_block + block
            proposal.entries = marker_entries + proposal.entries
        position = self._raft_log.plan_entry(len(block))
        proposal.store_timestamp_ms = now_ms
        proposal.results = self._store.stamp_block(
            block,
            proposal.entries,
            position + ENTRY_HEADER_SIZE_BYTES,
            now_ms,
            stamp_store_host=proposal.encoded,
        )

    # ------------------------------------------------------------------ answering

    def lost_leadership(self) -> None:
        """Leadership lost: reservations and pending sequences go; deferred writes fail."""
        self._producers.drop_pending()
        self._raft_log.cancel_plans()
        self.fail_unproposed(self.deferred)
        self.deferred = []
        self._fail_early(self._not_leader())

    def fail_unproposed(self, proposals: Sequence[Proposal]) -> None:
        error = self._not_leader()
        for proposal in proposals:
            if proposal.future.set_running_or_notify_cancel():
                proposal.future.set_exception(error)

    def fail_all(self, error: Exception) -> None:
        """The loop stops: unproposed writes fail, proposed ones have an unknown outcome."""
        for proposal in self.queued + self.deferred:
            if proposal.future.set_running_or_notify_cancel():
                proposal.future.set_exception(error)
        self._fail_early(error)
        for proposal in self._inflight.values():
            _resolve(proposal, None, UnknownOutcomeError(str(error)))
        self.queued, self.deferred, self._inflight = [], [], {}
        self._waiting_by_sequence = {}

    def applied(self, entries: Sequence[Entry]) -> None:
        """Answer every proposal whose index was applied (its own entry, or a replacement)."""
        for entry in entries:
            proposal = self._inflight.pop(entry.index, None)
            if proposal is None:
                continue
            if proposal.producer_id:
                self._waiting_by_sequence.pop((proposal.producer_id, proposal.sequence), None)
            if proposal.term == entry.term:
                _resolve(proposal, _outcome(proposal), None)
            else:
                _resolve(
                    proposal,
                    None,
                    UnknownOutcomeError(
                        "leadership changed before the write committed; it was replaced"
                    ),
                )

    def _stored_outcome(self, index: int, term: int) -> ProduceOutcome:
        """The outcome of an earlier, applied batch, read back from the log (a duplicate)."""
        entry = self._raft_log.entries(index, index + 1, 1 << 30)[0]
        if entry.term != term:
            raise AssertionError(f"entry {index} has term {entry.term}, the table says {term}")
        payload = entry.data
        results: list[PutResult] = []
        queue_ids: list[int] = []
        store_timestamp_ms = 0
        position = 0
        while position < len(payload):
            record = decode_record(payload, position)
            size = int.from_bytes(payload[position : position + 4], "big")
            if record.topic != CONTROL_TOPIC:
                results.append(
                    PutResult(
                        record.queue_offset,
                        record.physical_offset,
                        encode_message_id(record.store_host, record.physical_offset),
                    )
                )
                queue_ids.append(record.queue_id)
            store_timestamp_ms = record.store_timestamp_ms
            position += size
        return ProduceOutcome(results, queue_ids, store_timestamp_ms, True, index, term)


def _gap(producer_id: str, sequence: int) -> SequenceGapError:
    return SequenceGapError(
        f"sequence {sequence} of producer {producer_id!r} skips a number; resend the missing "
        "batches first, in order"
    )


def _outcome(proposal: Proposal) -> object:
    if proposal.control is not None:
        return proposal.control
    skip = 1 if proposal.producer_id else 0
    return ProduceOutcome(
        results=proposal.results[skip:],
        queue_ids=[queue_key[1] for queue_key, _ in proposal.entries[skip:]],
        store_timestamp_ms=proposal.store_timestamp_ms,
        duplicate=False,
        raft_index=proposal.index,
        raft_term=proposal.term,
    )


def _resolve(proposal: Proposal, value: object, error: Exception | None) -> None:
    for waiter in [proposal, *proposal.followers]:
        if waiter.future.done():
            continue
        if error is not None:
            waiter.future.set_exception(error)
        elif isinstance(value, ProduceOutcome) and waiter is not proposal:
            waiter.future.set_result(
                ProduceOutcome(
                    value.results,
                    value.queue_ids,
                    value.store_timestamp_ms,
                    True,
                    value.raft_index,
                    value.raft_term,
                )
            )
        else:
            waiter.future.set_result(value)
