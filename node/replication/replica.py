"""Replica: one member of a Raft group whose log is the node's CommitLog, and the Raft
implementation of the write seam (node/write_path.py).

One thread (the Raft loop) owns the Raft core (RawNode), the durable Raft log
(RaftLogStorage) and every write to the store. Everything else -- gRPC handlers, peer
streams, the housekeeping timer -- talks to it through its inbox (callables run on the loop)
and waits on futures. Each turn of the loop:

1. runs what the inbox holds (peer messages are stepped; proposals are queued);
2. ticks the core when a tick is due;
3. handles every Ready (``_handle_ready``, the contract in raftlog.raft.types): a leader
   sends its APPENDs first (thesis §10.2.1), then term/vote and entries are written and, when
   the core asks, synced (one fsync for everything the turn gathered: group commit), then the
   other messages go, then committed entries are applied;
4. proposes the queued writes as one batch of entries (``propose_batch``) and handles the
   Ready again, so a turn costs one append and one fsync however many writes it carried.

Writes. The gRPC thread validates and encodes a batch (store.encode_messages) and submits it.
The loop reserves the entry's position in the CommitLog (``plan_entry``), stamps queue
offsets, physical offsets and the store time into the records (``stamp_block``), and proposes
the bytes; followers store them at the same offsets, byte for byte. A write is answered when
its entry is applied: committed (a majority wrote it, fsynced in the default durability
mode) and dispatched, so an OK means durable as configured and visible to Pull.

Rules this module keeps:
- A new leader accepts writes only after it applied its first entry of its term (the no-op):
  its inherited tail is then committed and dispatched, and the next queue offsets are
  reloaded from the ConsumeQueues, so queue offsets stay dense across failovers.
- Proposals are planned only when no unpersisted entry exists (after the turn's Ready).
- A write whose proposal was not made when the caller gave up is refused (retry is safe);
  one that was proposed is an unknown outcome, never a failure.
- Control commands (topics, consumer offsets, producer sequences) are applied in log order on
  every replica, from records of the control topic (node/replication/control.py).
- Readers see only dispatched entries: the store's dispatch bound is the end of the applied
  entry.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from raftlog.node.errors import (
    InvalidRequestError,
    NodeError,
    NotLeaderError,
    OverloadedError,
    SequenceForgottenError,
    SequenceGapError,
    ShuttingDownError,
    TransferFailedError,
    UnknownOutcomeError,
)
from raftlog.node.peer.codec import encode_snapshot_meta
from raftlog.node.replication.control import (
    CONTROL_TOPIC,
    CommitOffsets,
    ControlCommand,
    CreateTopic,
    ProduceMarker,
    control_command_of,
    control_message,
    is_reserved_topic,
)
from raftlog.node.replication.producer_table import ProducerTable
from raftlog.node.replication.raft_entry import (
    ENTRY_ENVELOPES,
    ENTRY_HEADER_SIZE_BYTES,
    envelope_size_bytes,
)
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.segment_installer import SegmentTransferError, fetch_segments
from raftlog.node.replication.snapshot_install import install_snapshot
from raftlog.node.write_path import ClusterView, MemberView, ProduceOutcome
from raftlog.proto import peer_pb2
from raftlog.raft.config import Config
from raftlog.raft.progress import ProgressState
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    ProposalDroppedError,
    Ready,
    Role,
    SnapshotMeta,
)
from raftlog.store.errors import (
    BodyTooLargeError,
    InvalidOffsetError,
    InvalidQueueIdError,
    InvalidTopicError,
    StoreError,
)
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_id import encode_message_id
from raftlog.store.message_store import BlockEntry, MessageStore, PutResult
from raftlog.store.message_store import Message as StoreMessage
from raftlog.store.record import decode_record
from raftlog.store.topic_config import MAX_QUEUE_COUNT, TopicConfig
from raftlog.store.validation import validate_topic

_log = logging.getLogger(__name__)

_ROLE_NAMES = {
    Role.FOLLOWER: "follower",
    Role.PRE_CANDIDATE: "pre-candidate",
    Role.CANDIDATE: "candidate",
    Role.LEADER: "leader",
}
# Messages a leader may send before its own copy of the entries is durable (§10.2.1).
_EARLY_TYPES = frozenset((MessageType.APPEND, MessageType.HEARTBEAT))
_PRODUCER_RETENTION_MS = 15 * 60 * 1000
_VIEW_REFRESH_S = 0.05


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    """What the replica needs from the node's configuration (node/config.py builds it)."""

    node_id: str
    cluster_id: str
    peer_addresses: dict[str, str]  # every voter, this node included
    tick_ms: int = 50
    election_ticks: int = 10
    heartbeat_ticks: int = 2
    fsync_before_ack: bool = True
    max_inflight_bytes: int = 64 << 20
    preferred_leader: str | None = None
    # Where a follower stages the leader's segments during a segment transfer.
    staging_dir: str = ""
    snapshot_transfer_timeout_s: float = 120.0


@dataclass(slots=True)
class _Proposal:
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
    followers: list[_Proposal] = field(default_factory=list)
    # Producer-encoded records: the leader stamps its store host into them too.
    encoded: bool = False


class Replica:
    """Implements node.write_path.WritePath over Raft. ``send`` delivers outgoing messages
    (the peer transport); ``start`` runs the loop; ``close`` stops it and closes the log."""

    def __init__(
        self,
        settings: ReplicaSettings,
        store: MessageStore,
        raft_log: RaftLogStorage,
        send: Callable[[Sequence[Message]], None],
    ) -> None:
        self._settings = settings
        self._store = store
        self._raft_log = raft_log
        self._send = send
        self._node = RawNode(
            Config(
                node_id=settings.node_id,
                election_ticks=settings.election_ticks,
                heartbeat_ticks=settings.heartbeat_ticks,
                max_uncommitted_bytes=settings.max_inflight_bytes,
                preferred_leader=settings.preferred_leader,
                # A lone write: one APPEND and one ack per follower, and followers apply
                # after acknowledging the next write, not in its way (raft/config.py).
                announce_commit_on_tick=True,
            ),
            raft_log,
            random.Random(),
        )
        self._inbox: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._queued: list[_Proposal] = []
        self._deferred: list[_Proposal] = []
        self._inflight: dict[int, _Proposal] = {}
        self._waiting_by_sequence: dict[tuple[str, int], _Proposal] = {}
        self._reads: dict[bytes, tuple[int, concurrent.futures.Future[object]]] = {}
        self._producers = ProducerTable(_PRODUCER_RETENTION_MS)
        self._applied_index = raft_log.first_index() - 1
        self._visible_end = 0
        self._visible = threading.Condition()
        # Notified when the role, the known leader or write-readiness changes (writes wait).
        self._leader_changed = threading.Condition()
        # When this member last lost its leader (monotonic s; None while it knows one). A
        # write waits for an election only within two maximal election timeouts of that: an
        # election is under way then, while a member cut off for longer (a minority
        # partition) answers at once, so the client moves on to a member that can serve it.
        self._leader_lost_at: float | None = time.monotonic()
        self._election_window_s = 2 * (2 * settings.election_ticks * settings.tick_ms / 1000)
        self._write_ready = False
        self._term_start_index = 0
        self._stopping = threading.Event()
        # Set when the Raft loop died of an error: the process must exit (serve() checks).
        self.failed = False
        self._thread = threading.Thread(target=self._run, name="raft-loop", daemon=True)
        # When each peer was last heard from (monotonic s), for the cluster view.
        self._last_heard: dict[str, float] = {}
        self._view = self._build_view()
        self._view_built_at = 0.0
        # Follower: where the staged segments of the snapshot being installed end.
        self._staged_snapshot: tuple[int, int] | None = None  # (snapshot index, end offset)
        # Leader: peers sent a SNAPSHOT, and when to give up on them (report_snapshot).
        self._snapshot_deadlines: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def visible_end_physical_offset(self) -> int:
        """The store's dispatch bound: the end of the last applied entry."""
        return self._visible_end

    def start(self) -> None:
        self._thread.start()

    def close(self, transfer_timeout_s: float = 3.0) -> None:
        """Graceful stop: a leader hands leadership to the most up-to-date voter first, so the
        cluster does not wait an election timeout; then the loop stops."""
        view = self._view
        live_followers = sorted(
            (m for m in view.members if m.voter and m.recent_active and m.role == "follower"),
            key=lambda m: -m.match_index,
        )
        if self._thread.is_alive() and view.role == "leader" and live_followers:
            try:
                # Only to a member that answers: the core alone might pick a stopped one.
                self.transfer_leadership(live_followers[0].node_id, timeout_s=transfer_timeout_s)
            except NodeError as error:
                _log.warning("leadership transfer on shutdown: %s", error)
        self._stopping.set()
        self._inbox.put(lambda: None)
        if self._thread.is_alive():
            self._thread.join()
        self._fail_all(ShuttingDownError("the node is shutting down"))
        with self._visible:
            self._visible.notify_all()
        with self._leader_changed:
            self._leader_changed.notify_all()

    # ------------------------------------------------------------------ inbox

    def deliver(self, messages: Sequence[Message]) -> None:
        """Messages from peers (any thread)."""
        self._inbox.put(lambda: self._step(messages))

    def report_unreachable(self, peer_id: str) -> None:
        self._inbox.put(lambda: self._node.report_unreachable(peer_id))

    def report_peer_gone(self, peer_id: str) -> None:
        """``peer_id``'s stream to this node ended (its process ended): if it led us,
        campaign within a few ticks instead of an election timeout (raft forget_leader)."""
        self._inbox.put(lambda: self._forget_leader(peer_id))

    def _forget_leader(self, peer_id: str) -> None:
        if self._node.leader == peer_id and self._node.role is Role.FOLLOWER:
            _log.info("the stream from leader %s ended: campaigning within a few ticks", peer_id)
        self._node.forget_leader(peer_id)

    def _step(self, messages: Sequence[Message]) -> None:
        node_id = self._settings.node_id
        now = time.monotonic()
        for message in messages:
            if message.target != node_id:
                continue
            self._last_heard[message.source] = now
            if message.type is MessageType.SNAPSHOT and not self._stage_snapshot(message):
                continue
            self._node.step(message)

    def run_on_loop(self, task: Callable[[], object], timeout_s: float) -> object:
        """Run ``task`` on the Raft loop (the only thread that may read the Raft log) and
        return its result."""
        future: concurrent.futures.Future[object] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(task())
            except Exception as error:  # handed to the caller
                future.set_exception(error)

        self._inbox.put(run)
        return future.result(timeout=timeout_s)

    # ------------------------------------------------------------------ snapshots

    def _stage_snapshot(self, message: Message) -> bool:
        """Before the core sees a SNAPSHOT it must be able to install: copy the leader's
        segments into the staging directory (blocking this loop: the follower has nothing
        else useful to do). False drops the message; the leader sends another."""
        meta = message.snapshot
        assert meta is not None
        if message.term < self._node.term or meta.index <= self._node.commit_index:
            return True  # the core ignores or acknowledges it without installing anything
        address = self._settings.peer_addresses.get(message.source)
        if address is None:
            return False
        request = peer_pb2.FetchSegmentsRequest(
            cluster_id=self._settings.cluster_id,
            node_id=self._settings.node_id,
            snapshot=encode_snapshot_meta(meta),
            from_physical_offset=self._raft_log.log_end_physical_offset,
        )
        started = time.monotonic()
        try:
            end = fetch_segments(
                address,
                request,
                self._settings.staging_dir,
                self._store.commit_log.segment_size_bytes,
                self._settings.snapshot_transfer_timeout_s,
            )
        except (SegmentTransferError, OSError) as error:
            _log.warning("snapshot %d from %s not installed: %s", meta.index, message.source, error)
            return False
        _log.info(
            "copied the segments of snapshot %d (term %d) from %s in %.1f s",
            meta.index,
            meta.term,
            message.source,
            time.monotonic() - started,
        )
        self._staged_snapshot = (meta.index, end)
        return True

    def _install_snapshot(self, meta: SnapshotMeta) -> None:
        staged = self._staged_snapshot
        if staged is None or staged[0] != meta.index:
            raise AssertionError(f"snapshot {meta.index} reached Ready without staged segments")
        end = staged[1]
        install_snapshot(
            OsFileSystem(), self._store, self._raft_log, self._settings.staging_dir, meta, end
        )
        self._staged_snapshot = None
        self._applied_index = meta.index
        self._visible_end = end
        self._store.dispatch(end)
        with self._visible:
            self._visible.notify_all()
        _log.info(
            "installed snapshot %d (term %d), log continues at %d", meta.index, meta.term, end
        )

    def _track_snapshots(self, messages: Sequence[Message]) -> None:
        deadline = time.monotonic() + self._settings.snapshot_transfer_timeout_s
        for message in messages:
            if message.type is MessageType.SNAPSHOT:
                self._snapshot_deadlines[message.target] = deadline

    def _expire_snapshots(self, now: float) -> None:
        """A follower that did not confirm a snapshot in time gets a fresh one."""
        if not self._snapshot_deadlines:
            return
        progress = self._node.status().progress
        for peer_id, deadline in list(self._snapshot_deadlines.items()):
            state = progress.get(peer_id)
            if state is None or state.state is not ProgressState.SNAPSHOT:
                del self._snapshot_deadlines[peer_id]
            elif now >= deadline:
                del self._snapshot_deadlines[peer_id]
                self._node.report_snapshot(peer_id, False)

    def end_of_entry(self, log_index: int, log_term: int, timeout_s: float = 5.0) -> int | None:
        """Where entry ``log_index`` (of ``log_term``) ends in this log, or None (any
        thread)."""
        result = self.run_on_loop(
            lambda: self._raft_log.end_of_entry(log_index, log_term), timeout_s
        )
        assert result is None or isinstance(result, int)
        return result

    # ------------------------------------------------------------------ retention

    def run_retention(self) -> None:
        """Delete what the store's retention policy lets go, after compacting the Raft log
        over it (any thread; runs on the loop): segments are deleted only below the first
        entry the compacted log still holds."""
        self._inbox.put(self._retain)

    def _retain(self) -> None:
        store, raft_log = self._store, self._raft_log
        deletable_end = store.retention_deletable_end_offset()
        if deletable_end <= store.commit_log.min_offset:
            return
        compact_index = raft_log.last_index_ending_by(deletable_end, self._applied_index)
        if compact_index > raft_log.first_index() - 1:
            raft_log.compact(compact_index, self._node.conf_state)
        first_kept = compact_index + 1
        bound = (
            raft_log.placement(first_kept).physical_offset
            if first_kept <= raft_log.last_index()
            else raft_log.log_end_physical_offset
        )
        report = store.run_retention(max_deleted_end_offset=bound)
        if report.deleted_segments:
            _log.info(
                "retention: compacted the log to index %d, deleted %d segment(s)",
                compact_index,
                report.deleted_segments,
            )

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        tick_s = self._settings.tick_ms / 1000
        next_tick = time.monotonic() + tick_s
        inbox = self._inbox
        try:
            while not self._stopping.is_set():
                timeout_s = max(0.0, next_tick - time.monotonic())
                try:
                    task = inbox.get(timeout=timeout_s)
                    task()
                    while True:
                        inbox.get_nowait()()
                except queue.Empty:
                    pass
                now = time.monotonic()
                if now >= next_tick:
                    self._node.tick()
                    next_tick += tick_s
                    if next_tick <= now:
                        # Fell behind (a long fsync, a pause): skip the missed ticks rather
                        # than firing them back to back, which would expire timeouts at once.
                        next_tick = now + tick_s
                self._handle_ready()
                if self._queued:
                    self._propose_queued()
                    self._handle_ready()
                if now - self._view_built_at >= _VIEW_REFRESH_S:
                    self._view = self._build_view()
                    self._view_built_at = now
                    self._expire_snapshots(now)
        except BaseException:
            _log.exception("the raft loop failed; the node stops")
            self.failed = True
            self._stopping.set()
            raise

    def _handle_ready(self) -> None:
        node = self._node
        raft_log = self._raft_log
        while node.has_ready():
            ready = node.ready()
            if ready.soft_state is not None:
                self._on_role(ready)
            messages = ready.messages
            if node.role is Role.LEADER and messages:
                early = [m for m in messages if m.type in _EARLY_TYPES]
                messages = [m for m in messages if m.type not in _EARLY_TYPES]
                if early:
                    self._send(early)
                self._track_snapshots(messages)
            if ready.snapshot is not None:
                self._install_snapshot(ready.snapshot)
            # Entries before the hard state (as etcd's WAL, and the simulation's driver): the
            # Ready's commit index may already cover entries that replace a conflicting
            # uncommitted tail in this same Ready, and the log refuses to truncate at or
            # below the commit index it holds.
            if ready.entries:
                raft_log.append(ready.entries)
            if ready.hard_state is not None:
                raft_log.set_hard_state(ready.hard_state)
            if ready.must_sync:
                raft_log.sync(flush_entries=self._settings.fsync_before_ack)
            if messages:
                self._send(messages)
            if ready.committed_entries:
                self._apply(ready.committed_entries)
            for read_state in ready.read_states:
                pending = self._reads.get(read_state.context)
                if pending is not None:
                    self._reads[read_state.context] = (read_state.index, pending[1])
            node.advance(ready)
            self._release_reads()
            self._check_write_ready()

    def _on_role(self, ready: Ready) -> None:
        assert ready.soft_state is not None
        if ready.soft_state.role is Role.LEADER:
            term = self._node.term
            self._term_start_index = next(
                (e.index for e in ready.entries if e.term == term),
                self._raft_log.last_index() + 1,
            )
            _log.info("leader in term %d from index %d", term, self._term_start_index)
        elif self._write_ready or self._deferred:
            self._write_ready = False
            self._producers.drop_pending()
            self._raft_log.cancel_plans()
            self._fail_unproposed(self._deferred)
            self._deferred = []
        self._view = self._build_view()
        if self._view.leader_id is not None:
            self._leader_lost_at = None
        elif self._leader_lost_at is None:
            self._leader_lost_at = time.monotonic()
        with self._leader_changed:
            self._leader_changed.notify_all()

    def _check_write_ready(self) -> None:
        if (
            not self._write_ready
            and self._node.role is Role.LEADER
            and self._applied_index >= self._term_start_index
        ):
            # The inherited tail is committed and dispatched: queue offsets are final.
            self._store.reload_next_queue_offsets()
            self._write_ready = True
            self._queued = self._deferred + self._queued
            self._deferred = []
            with self._leader_changed:
                self._leader_changed.notify_all()

    # ------------------------------------------------------------------ proposing

    def _not_leader(self) -> NotLeaderError:
        leader = self._node.leader
        if leader is None or leader == self._settings.node_id:
            return NotLeaderError(None, None, self._node.term)
        return NotLeaderError(leader, self._settings.peer_addresses.get(leader), self._node.term)

    def _propose_queued(self) -> None:
        queued, self._queued = self._queued, []
        if self._node.role is not Role.LEADER:
            self._fail_unproposed(queued)
            return
        if not self._write_ready:
            self._deferred.extend(queued)
            return
        batch: list[_Proposal] = []
        for proposal in queued:
            if not proposal.future.set_running_or_notify_cancel():
                continue  # the caller gave up before it was proposed
            if proposal.producer_id and not self._admit_sequence(proposal):
                continue
            self._stamp(proposal)
            batch.append(proposal)
        if not batch:
            return
        try:
            last_index = self._node.propose_batch([bytes(p.block) for p in batch])
        except ProposalDroppedError as error:
            self._raft_log.cancel_plans()
            self._store.reload_next_queue_offsets()
            for proposal in batch:
                proposal.future.set_exception(OverloadedError(f"write refused: {error}"))
            return
        term = self._node.term
        for index, proposal in enumerate(batch, last_index - len(batch) + 1):
            proposal.index, proposal.term = index, term
            self._inflight[index] = proposal
            if proposal.producer_id:
                self._producers.propose(proposal.producer_id, proposal.sequence)
                self._waiting_by_sequence[(proposal.producer_id, proposal.sequence)] = proposal

    def _admit_sequence(self, proposal: _Proposal) -> bool:
        """Idempotent producer: True when the batch is to be stored; otherwise the proposal's
        future is answered here (duplicate, gap, or chained to the in-flight original)."""
        key = (proposal.producer_id, proposal.sequence)
        verdict = self._producers.check(*key)
        if verdict.action == "store":
            return True
        if verdict.action == "gap":
            proposal.future.set_exception(
                SequenceGapError(
                    f"sequence {proposal.sequence} of producer {proposal.producer_id!r} skips "
                    "a number; resend the missing batches first, in order"
                )
            )
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

    def _stamp(self, proposal: _Proposal) -> None:
        block = proposal.block
        if proposal.producer_id:
            marker_block, marker_entries = self._store.encode_messages(
                [control_message(ProduceMarker(proposal.producer_id, proposal.sequence))]
            )
            block = proposal.block = marker_block + block
            proposal.entries = marker_entries + proposal.entries
        position = self._raft_log.plan_entry(len(block))
        proposal.store_timestamp_ms = int(time.time() * 1000)
        proposal.results = self._store.stamp_block(
            block,
            proposal.entries,
            position + ENTRY_HEADER_SIZE_BYTES,
            proposal.store_timestamp_ms,
            stamp_store_host=proposal.encoded,
        )

    def _fail_unproposed(self, proposals: Sequence[_Proposal]) -> None:
        error = self._not_leader()
        for proposal in proposals:
            if proposal.future.set_running_or_notify_cancel():
                proposal.future.set_exception(error)

    def _fail_all(self, error: Exception) -> None:
        for proposal in self._queued + self._deferred:
            if proposal.future.set_running_or_notify_cancel():
                proposal.future.set_exception(error)
        for proposal in self._inflight.values():
            self._resolve(proposal, None, UnknownOutcomeError(str(error)))
        self._queued, self._deferred, self._inflight = [], [], {}
        for _, future in self._reads.values():
            if not future.done():
                future.set_exception(error)
        self._reads = {}

    # ------------------------------------------------------------------ applying

    def _apply(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.type is EntryType.NORMAL and entry.data:
                command = control_command_of(entry.data)
                if command is not None:
                    self._apply_control(entry, *command)
        last_index = entries[-1].index
        self._applied_index = last_index
        self._visible_end = self._raft_log.placement(last_index).end_physical_offset
        self._store.dispatch(self._visible_end)
        for entry in entries:
            proposal = self._inflight.pop(entry.index, None)
            if proposal is None:
                continue
            if proposal.term == entry.term:
                self._resolve(proposal, self._outcome(proposal), None)
            else:
                self._resolve(
                    proposal,
                    None,
                    UnknownOutcomeError(
                        "leadership changed before the write committed; it was replaced"
                    ),
                )
        with self._visible:
            self._visible.notify_all()

    def _apply_control(self, entry: Entry, command: ControlCommand, timestamp_ms: int) -> None:
        try:
            if isinstance(command, ProduceMarker):
                self._producers.apply(
                    command.producer_id, command.sequence, (entry.index, entry.term), timestamp_ms
                )
                self._waiting_by_sequence.pop((command.producer_id, command.sequence), None)
            elif isinstance(command, CreateTopic):
                self._store.create_topic(command.topic, command.queue_count)
            else:
                for topic, queue_id, queue_offset in command.offsets:
                    self._store.commit_consumer_offset(command.group, topic, queue_id, queue_offset)
        except StoreError as error:
            # The leader validated it; a replica that disagrees logs it (same on every replica).
            _log.warning("control command at index %d not applied: %s", entry.index, error)

    def _outcome(self, proposal: _Proposal) -> object:
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

    def _resolve(self, proposal: _Proposal, value: object, error: Exception | None) -> None:
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

    # ------------------------------------------------------------------ reads

    def _forget_read(self, context: bytes) -> None:
        self._reads.pop(context, None)

    def _release_reads(self) -> None:
        if not self._reads:
            return
        for context, (index, future) in list(self._reads.items()):
            if index and self._applied_index >= index:
                del self._reads[context]
                future.set_result(index)

    # ------------------------------------------------------------------ WritePath

    def _submit(self, proposal: _Proposal, timeout_s: float) -> object:
        if self._stopping.is_set():
            raise ShuttingDownError("the node is shutting down")

        def enqueue() -> None:
            self._queued.append(proposal)

        self._inbox.put(enqueue)
        try:
            return proposal.future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            if proposal.future.cancel():
                raise self._not_leader_for_timeout() from None
            raise UnknownOutcomeError(
                f"the write was proposed but not committed within {timeout_s:.1f} s; it may "
                "still commit"
            ) from None

    def _not_leader_for_timeout(self) -> NodeError:
        view = self._view
        if view.role == "leader":
            return OverloadedError("the leader could not take the write in time; retry")
        leader = view.leader_id
        if leader is None or leader == self._settings.node_id:
            return NotLeaderError(None, None, view.term)
        return NotLeaderError(leader, view.leader_address, view.term)

    def _check_batch_fits(self, block_size_bytes: int) -> None:
        segment_size = self._store.commit_log.segment_size_bytes
        # Room for the envelope and an idempotence marker record.
        if envelope_size_bytes(EntryType.NORMAL, block_size_bytes) + 1024 > segment_size:
            raise BodyTooLargeError(
                f"the batch encodes to {block_size_bytes} bytes; one CommitLog segment "
                f"({segment_size} bytes) must hold it: send smaller batches"
            )

    def _check_leader_now(self, wait_s: float = 0.0) -> None:
        """Raise NotLeaderError unless this member leads. With ``wait_s``, a member that lost
        its leader recently (an election is under way) first waits up to that long for one,
        so the caller gets a redirect the moment a leader is elected rather than backing off
        and guessing when to retry."""
        view = self._view
        lost_at = self._leader_lost_at
        if view.leader_id is None and wait_s > 0 and lost_at is not None:
            wait_until_s = min(time.monotonic() + wait_s, lost_at + self._election_window_s)
            with self._leader_changed:
                self._leader_changed.wait_for(
                    lambda: self._view.leader_id is not None or self._stopping.is_set(),
                    max(0.0, wait_until_s - time.monotonic()),
                )
            view = self._view
        if view.role == "leader" and not self._write_ready and wait_s > 0:
            # A new leader takes writes once it applied its inherited log (which may create
            # the very topic this write names): wait for that rather than refuse the topic.
            with self._leader_changed:
                self._leader_changed.wait_for(
                    lambda: (
                        self._write_ready or self._view.role != "leader" or self._stopping.is_set()
                    ),
                    wait_s,
                )
            view = self._view
        if view.role != "leader":
            leader = view.leader_id
            if leader is None:
                raise NotLeaderError(None, None, view.term)
            raise NotLeaderError(leader, view.leader_address, view.term)

    def produce(
        self,
        messages: Sequence[StoreMessage],
        *,
        producer_id: str,
        sequence: int,
        timeout_s: float,
    ) -> ProduceOutcome:
        self._check_leader_now(wait_s=timeout_s)
        self._store.check_writable()
        for topic in {m.topic for m in messages}:
            if is_reserved_topic(topic):
                raise InvalidTopicError(f"topic {topic!r} is reserved for raftlog's own use")
        block, entries = self._store.encode_messages(messages)
        return self._produce_block(block, entries, producer_id, sequence, timeout_s)

    def produce_encoded(
        self,
        topic: str,
        records: bytes,
        *,
        producer_id: str,
        sequence: int,
        timeout_s: float,
    ) -> ProduceOutcome:
        self._check_leader_now(wait_s=timeout_s)
        self._store.check_writable()
        entries = self._store.check_encoded(records)
        for (record_topic, _), _ in entries:
            if record_topic != topic:
                raise InvalidTopicError(
                    f"a record names topic {record_topic!r}; the request is for {topic!r}"
                )
            if is_reserved_topic(record_topic):
                raise InvalidTopicError(f"topic {topic!r} is reserved for raftlog's own use")
        return self._produce_block(
            bytearray(records), entries, producer_id, sequence, timeout_s, encoded=True
        )

    def _produce_block(
        self,
        block: bytearray,
        entries: list[BlockEntry],
        producer_id: str,
        sequence: int,
        timeout_s: float,
        *,
        encoded: bool = False,
    ) -> ProduceOutcome:
        if not entries:
            raise InvalidRequestError("the batch holds no message")
        self._check_batch_fits(len(block))
        proposal = _Proposal(
            block, entries, producer_id=producer_id, sequence=sequence, encoded=encoded
        )
        outcome = self._submit(proposal, timeout_s)
        assert isinstance(outcome, ProduceOutcome)
        return outcome

    def _control(self, command: ControlCommand, timeout_s: float) -> int:
        """Commit ``command`` through the log; returns its entry's index."""
        self._check_leader_now()
        self._store.check_writable()
        block, entries = self._store.encode_messages([control_message(command)])
        proposal = _Proposal(block, entries, control=command)
        self._submit(proposal, timeout_s)
        return proposal.index

    def commit_offsets(
        self, group: str, offsets: Sequence[tuple[str, int, int]], *, timeout_s: float
    ) -> int:
        # A lagging follower redirects, and a new leader applies its log first, rather than
        # answering NOT_FOUND for a topic it has not applied yet.
        self._check_leader_now(wait_s=timeout_s)
        for topic, queue_id, queue_offset in offsets:
            queue_count = self._store.describe_topic(topic).queue_count
            if not 0 <= queue_id < queue_count:
                raise InvalidQueueIdError(
                    f"queue id {queue_id} is not below topic {topic!r}'s {queue_count} queues"
                )
            if queue_offset < 0:
                raise InvalidOffsetError(f"queue offset must be >= 0, got {queue_offset}")
        return self._control(CommitOffsets(group, tuple(offsets)), timeout_s)

    def fetch_offsets(
        self, group: str, queues: Sequence[tuple[str, int]], *, timeout_s: float
    ) -> list[int | None]:
        self._check_leader_now()
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        context = os.urandom(16)

        def ask() -> None:
            if self._node.role is not Role.LEADER:
                future.set_exception(self._not_leader())
                return
            self._reads[context] = (0, future)
            self._node.read_index(context)

        self._inbox.put(ask)
        try:
            future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            self._inbox.put(lambda: self._forget_read(context))
            raise UnknownOutcomeError(
                f"the read did not finish within {timeout_s:.1f} s (no quorum answered)"
            ) from None
        return [self._store.fetch_consumer_offset(group, t, q) for t, q in queues]

    def create_topic(
        self, topic: str, queue_count: int, *, timeout_s: float
    ) -> tuple[TopicConfig, bool]:
        if is_reserved_topic(topic):
            raise InvalidTopicError(f"topic {topic!r} is reserved for raftlog's own use")
        validate_topic(topic, self._store.limits)
        if not 1 <= queue_count <= MAX_QUEUE_COUNT:
            raise InvalidQueueIdError(
                f"queue count must be 1..{MAX_QUEUE_COUNT}, got {queue_count}"
            )
        self._check_leader_now(wait_s=timeout_s)  # the topic may be in its unapplied log
        existing = {t.name: t for t in self._store.list_topics()}.get(topic)
        if existing is not None and queue_count == existing.queue_count:
            return existing, False
        if existing is not None and queue_count < existing.queue_count:
            raise InvalidQueueIdError(
                f"topic {topic!r} has {existing.queue_count} queues; cannot shrink to {queue_count}"
            )
        self._control(CreateTopic(topic, queue_count), timeout_s)
        return self._store.describe_topic(topic), True

    def transfer_leadership(self, target_id: str | None, *, timeout_s: float) -> ClusterView:
        self._check_leader_now()
        if target_id == self._settings.node_id:
            return self._view
        if target_id is not None and target_id not in self._settings.peer_addresses:
            raise InvalidRequestError(f"no member is called {target_id!r}")
        self._inbox.put(lambda: self._node.transfer_leadership(target_id))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            view = self._view
            if view.leader_id not in (None, self._settings.node_id) and (
                target_id is None or view.leader_id == target_id
            ):
                return view
            time.sleep(0.02)
        raise TransferFailedError(
            f"leadership did not move within {timeout_s:.1f} s (it may still)"
        )

    def cluster_view(self) -> ClusterView:
        return self._view

    def wait_visible(self, after_physical_offset: int, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        with self._visible:
            while (
                self._store.dispatched_physical_offset <= after_physical_offset
                and not self._stopping.is_set()
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._visible.wait(remaining)
        return self._store.dispatched_physical_offset

    # ------------------------------------------------------------------ status

    def _heard_recently(self, member_id: str) -> bool:
        """Heard from within an election timeout (the core's own flag is reset at every
        check-quorum round, so it reads False for a moment even for a healthy peer)."""
        if member_id == self._settings.node_id:
            return True
        heard = self._last_heard.get(member_id)
        timeout_s = self._settings.election_ticks * self._settings.tick_ms / 1000
        return heard is not None and time.monotonic() - heard < timeout_s

    def _build_view(self) -> ClusterView:
        status = self._node.status()
        settings = self._settings
        conf: ConfState = status.conf_state
        members: list[MemberView] = []
        last_index = status.last_index
        for member_id in [*conf.voters, *conf.learners]:
            progress = status.progress.get(member_id)
            if member_id == settings.node_id:
                role = _ROLE_NAMES[status.role]
            elif member_id == status.leader:
                role = "leader"
            elif member_id in conf.learners:
                role = "learner"
            else:
                role = "follower" if status.role is Role.LEADER else "unknown"
            members.append(
                MemberView(
                    node_id=member_id,
                    address=settings.peer_addresses.get(member_id, ""),
                    role=role,
                    voter=member_id in conf.voters,
                    has_progress=progress is not None,
                    match_index=progress.match_index if progress else 0,
                    lag_entries=max(0, last_index - progress.match_index) if progress else 0,
                    replication_state=progress.state.name.lower() if progress else "",
                    inflight_appends=progress.inflight if progress else 0,
                    recent_active=self._heard_recently(member_id) if progress else False,
                )
            )
        leader = status.leader
        return ClusterView(
            cluster_id=settings.cluster_id,
            node_id=settings.node_id,
            role=_ROLE_NAMES[status.role],
            leader_id=leader,
            leader_address=settings.peer_addresses.get(leader) if leader else None,
            term=status.term,
            commit_index=status.commit_index,
            applied_index=self._applied_index,
            last_index=last_index,
            members=members,
            transferring_to=status.lead_transferee,
        )


def open_replica_storage(
    store: MessageStore, root_dir: str, voters: Sequence[str]
) -> RaftLogStorage:
    """The Raft log over ``store``'s CommitLog (truncations go through the store, so its
    ConsumeQueues and index follow)."""
    from raftlog.store.filesystem import OsFileSystem

    return RaftLogStorage(
        OsFileSystem(),
        root_dir,
        store.commit_log,
        bootstrap=ConfState(voters=tuple(sorted(voters))),
        truncate_commit_log=store.truncate_after,
    )


__all__ = ["ENTRY_ENVELOPES", "Replica", "ReplicaSettings", "open_replica_storage"]
