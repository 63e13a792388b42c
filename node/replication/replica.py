"""Replica: one member of a Raft group whose log is the node's CommitLog -- its thread, inbox,
timers and futures. What a Ready does is ready.py's; what a write goes through before it is
proposed is proposals.py's; the WritePath the services call is raft_write_path.py's.

One thread (the Raft loop) owns the Raft core (RawNode), the durable Raft log
(RaftLogStorage) and every write to the store. Everything else -- gRPC handlers, peer
streams, the housekeeping timer -- talks to it through its inbox (callables run on the loop)
and waits on futures. Each turn of the loop:

1. runs what the inbox holds (peer messages are stepped; proposals are queued);
2. ticks the core when a tick is due;
3. handles every Ready (ReadyHandler: persist, send, apply; group commit: one fsync for
   everything the turn gathered);
4. proposes the queued writes as one batch of entries and handles the Ready again, so a turn
   costs one append and one fsync however many writes it carried.

Rules this module keeps:
- A new leader accepts writes only after it applied its first entry of its term (the no-op):
  its inherited tail is then committed and dispatched, and the next queue offsets are
  reloaded from the ConsumeQueues, so queue offsets stay dense across failovers.
- Proposals are planned only when no unpersisted entry exists (after the turn's Ready).
- Readers see only dispatched entries: the store's dispatch bound is the end of the applied
  entry (``visible_end_physical_offset``).
- A write waits for a leader only within two election timeouts of losing one (an election is
  under way then); a member cut off longer answers at once, so the client moves on.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from raftlog.node.errors import NodeError, NotLeaderError, ShuttingDownError, TransferFailedError
from raftlog.node.peer.dialer import PeerDialer
from raftlog.node.replication import applied_state
from raftlog.node.replication.cluster_view import build_cluster_view
from raftlog.node.replication.proposals import Proposal, Proposals
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.ready import ReadyHandler, ReadySettings
from raftlog.node.replication.snapshot_transfer import SnapshotTransfers
from raftlog.node.write_path import ClusterView
from raftlog.raft.config import Config
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import Entry, Message, MessageType, Ready, Role
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import MessageStore

_log = logging.getLogger(__name__)

_VIEW_REFRESH_S = 0.05
# A leader stopping hands over only to a follower heard from within this many heartbeats.
_HANDOVER_FRESH_HEARTBEATS = 3


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    """What the replica needs from the node's configuration (node/config.py builds it)."""

    node_id: str
    cluster_id: str
    # Every member, this node included (the member's AddressBook, updated in place).
    peer_addresses: dict[str, str]
    tick_ms: int = 50
    election_ticks: int = 10
    heartbeat_ticks: int = 2
    fsync_before_ack: bool = True
    max_inflight_bytes: int = 64 << 20
    preferred_leader: str | None = None
    # Where a follower stages the leader's segments during a segment transfer.
    staging_dir: str = ""
    snapshot_transfer_timeout_s: float = 120.0
    # Reaches a member's peer port (segment transfer); the default: derived ports, no TLS.
    dialer: PeerDialer = field(default_factory=PeerDialer)
    # The applied-state checkpoint's file (applied_state.py); "" keeps none: every restart
    # replays the log from the snapshot point.
    applied_state_path: str = ""


class Replica:
    """The Raft loop of one member. ``send`` delivers outgoing messages (the peer transport);
    ``start`` runs the loop; ``close`` stops it."""

    def __init__(
        self,
        settings: ReplicaSettings,
        store: MessageStore,
        raft_log: RaftLogStorage,
        send: Callable[[Sequence[Message]], None],
        on_advanced: Callable[[Ready], None] | None = None,
    ) -> None:
        self.settings = settings
        # Hears every Ready once it is done (the member follows membership changes there).
        self._on_advanced = on_advanced
        self.store = store
        self.raft_log = raft_log
        self._send = send
        # Where a restart starts applying: the checkpoint of the applied state, when usable.
        checkpoint = _usable_checkpoint(settings, raft_log)
        self.node = RawNode(_raft_config(settings, checkpoint), raft_log, random.Random())
        self.snapshots = SnapshotTransfers(settings, store, raft_log)
        self.ready = ReadyHandler(
            self.node,
            raft_log,
            store,
            OsFileSystem(),
            self,
            self,
            ReadySettings(settings.fsync_before_ack, settings.staging_dir),
        )
        if checkpoint is not None:
            self.ready.restore(checkpoint)
            _log.info(
                "applied state restored at index %d (term %d)", checkpoint.index, checkpoint.term
            )
        # The applied index the last checkpoint written holds (nothing new: no write).
        self._checkpointed_index = checkpoint.index if checkpoint else -1
        self.proposals = Proposals(
            self.node, raft_log, store, self.ready.producers, self.not_leader_error
        )
        self._inbox: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._reads: dict[bytes, tuple[int, concurrent.futures.Future[object]]] = {}
        self.visible = threading.Condition()
        # Notified when the role, the known leader or write-readiness changes (writes wait).
        self.leader_changed = threading.Condition()
        # When this member last lost its leader (monotonic s; None while it knows one).
        self.leader_lost_at: float | None = time.monotonic()
        self.election_window_s = 2 * (2 * settings.election_ticks * settings.tick_ms / 1000)
        self.write_ready = False
        self._term_start_index = 0
        self.stopping = threading.Event()
        # Set when the Raft loop died of an error: the process must exit (serve() checks).
        self.failed = False
        self._thread = threading.Thread(target=self._run, name="raft-loop", daemon=True)
        # When each peer was last heard from (monotonic s), for the cluster view.
        self._last_heard: dict[str, float] = {}
        self.view = self._build_view()
        self._view_built_at = 0.0
        # Start-up replay: the committed entries this member applies again before it is
        # where it stopped (logged once applied, with how long it took).
        self._replay_from = self.ready.applied_index
        commit = raft_log.initial_state()[0].commit
        self._replay_to = commit if commit > self._replay_from else 0
        self._replay_began = 0.0

    # ------------------------------------------------------------------ lifecycle

    @property
    def visible_end_physical_offset(self) -> int:
        """The store's dispatch bound: the end of the last applied entry."""
        return self.ready.visible_end

    def start(self) -> None:
        self._replay_began = time.monotonic()
        if self.ready.visible_end:
            # Restored from a checkpoint: what the store's own checkpoint does not cover yet.
            self.store.dispatch(self.ready.visible_end)
        self._thread.start()

    def save_applied_state(self, timeout_s: float = 5.0) -> bool:
        """Write the applied-state checkpoint (captured on the loop, written here) when the
        applied index moved since the last one; whether it wrote one. Any thread; after
        ``close``, the final state."""
        if not self.settings.applied_state_path:
            return False
        if self._thread.is_alive():
            captured = self.run_on_loop(self.ready.capture, timeout_s)
        else:
            captured = self.ready.capture()
        assert isinstance(captured, applied_state.AppliedState)
        if captured.index == self._checkpointed_index:
            return False
        applied_state.save(OsFileSystem(), self.settings.applied_state_path, captured)
        self._checkpointed_index = captured.index
        return True

    def close(self, handover_s: float = 3.0) -> None:
        """Graceful stop: a leader first hands leadership to a follower that answers, so the
        cluster does not wait an election timeout (``_hand_over``, ``handover_s`` at most);
        then the loop stops."""
        if self._thread.is_alive() and self.view.role == "leader":
            self._hand_over(handover_s)
        self.stopping.set()
        self._inbox.put(lambda: None)
        if self._thread.is_alive():
            self._thread.join()
        shutting_down = ShuttingDownError("the node is shutting down")
        self.proposals.fail_all(shutting_down)
        for _, future in self._reads.values():
            if not future.done():
                future.set_exception(shutting_down)
        self._reads = {}
        with self.visible:
            self.visible.notify_all()
        with self.leader_changed:
            self.leader_changed.notify_all()

    def _hand_over(self, budget_s: float) -> None:
        """Transfer leadership to the most up-to-date voter heard from within the last few
        heartbeats (a frozen or cut-off follower is not, so it is never waited for), the next
        one if a transfer does not take within two election timeouts (the core gives up on
        it after one), until ``budget_s`` is spent."""
        settings = self.settings
        fresh_s = _HANDOVER_FRESH_HEARTBEATS * settings.heartbeat_ticks * settings.tick_ms / 1000
        attempt_s = 2 * settings.election_ticks * settings.tick_ms / 1000
        now = time.monotonic()
        heard = dict(self._last_heard)
        targets = sorted(
            (
                m
                for m in self.view.members
                if m.voter and m.role == "follower" and now - heard.get(m.node_id, 0.0) < fresh_s
            ),
            key=lambda m: (-m.match_index, -heard[m.node_id]),
        )
        deadline = now + budget_s
        for target in targets:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                break
            try:
                self.transfer_leadership(target.node_id, min(remaining_s, attempt_s))
                return
            except NodeError as error:
                _log.warning("leadership transfer to %s on shutdown: %s", target.node_id, error)
        if not targets:
            _log.warning("no follower answered lately: stopping without a leadership transfer")

    # ------------------------------------------------------------------ inbox

    def deliver(self, messages: Sequence[Message]) -> None:
        """Messages from peers (any thread)."""
        self._inbox.put(lambda: self._step(messages))

    def report_unreachable(self, peer_id: str) -> None:
        self._inbox.put(lambda: self.node.report_unreachable(peer_id))

    def report_peer_gone(self, peer_id: str) -> None:
        """``peer_id``'s stream to this node ended (its process ended): if it led us,
        campaign within a few ticks instead of an election timeout (raft forget_leader)."""
        self._inbox.put(lambda: self._forget_leader(peer_id))

    def _forget_leader(self, peer_id: str) -> None:
        if self.node.leader == peer_id and self.node.role is Role.FOLLOWER:
            _log.info("the stream from leader %s ended: campaigning within a few ticks", peer_id)
        self.node.forget_leader(peer_id)

    def _step(self, messages: Sequence[Message]) -> None:
        node_id = self.settings.node_id
        now = time.monotonic()
        for message in messages:
            if message.target != node_id:
                continue
            self._last_heard[message.source] = now
            if message.type is MessageType.SNAPSHOT and not self.snapshots.stage(
                message, self.node, self.ready
            ):
                continue
            self.node.step(message)

    def submit(self, proposal: Proposal) -> None:
        """Queue a write for the next turn (any thread)."""
        if self.stopping.is_set():
            raise ShuttingDownError("the node is shutting down")
        self._inbox.put(lambda: self.proposals.queued.append(proposal))

    def read_index(self, context: bytes, future: concurrent.futures.Future[object]) -> None:
        """Resolve ``future`` with a read index once the leader confirmed it and this member
        applied that far (any thread). A follower forwards the read to the leader it knows;
        with none known, ``future`` fails at once with NotLeaderError."""

        def ask() -> None:
            if self.node.role is not Role.LEADER and self.node.leader is None:
                future.set_exception(self.not_leader_error())
                return
            if future.done():  # given up (cancelled) before the loop got to it
                return
            self._reads[context] = (0, future)
            self.node.read_index(context)

        self._inbox.put(ask)

    def forget_read(self, context: bytes) -> None:
        """The caller of ``read_index`` gave up (any thread)."""

        def forget() -> None:
            self._reads.pop(context, None)

        self._inbox.put(forget)

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

    def leading_term(self, timeout_s: float) -> int | None:
        """This member's term when it leads and takes writes, else None (any thread; asks
        the Raft loop only when the view says it leads)."""
        if self.view.role != "leader":
            return None

        def look() -> int | None:
            node = self.node
            return node.term if node.role is Role.LEADER and self.write_ready else None

        term = self.run_on_loop(look, timeout_s)
        assert term is None or isinstance(term, int)
        return term

    def end_of_entry(self, log_index: int, log_term: int, timeout_s: float = 5.0) -> int | None:
        """Where entry ``log_index`` (of ``log_term``) ends in this log, or None (any
        thread)."""
        result = self.run_on_loop(
            lambda: self.raft_log.end_of_entry(log_index, log_term), timeout_s
        )
        assert result is None or isinstance(result, int)
        return result

    def run_retention(self) -> None:
        """Delete what the store's retention policy lets go, after compacting the Raft log
        over it (any thread; runs on the loop)."""
        self._inbox.put(lambda: self.snapshots.retain(self.ready.applied_index, self.node))

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        tick_s = self.settings.tick_ms / 1000
        next_tick = time.monotonic() + tick_s
        inbox = self._inbox
        try:
            while not self.stopping.is_set():
                try:
                    inbox.get(timeout=max(0.0, next_tick - time.monotonic()))()
                    while True:
                        inbox.get_nowait()()
                except queue.Empty:
                    pass
                now = time.monotonic()
                if now >= next_tick:
                    self.node.tick()
                    next_tick += tick_s
                    if next_tick <= now:
                        # Fell behind (a long fsync, a pause): skip the missed ticks rather
                        # than firing them back to back, which would expire timeouts at once.
                        next_tick = now + tick_s
                self.ready.drain()
                if self.proposals.queued or self.proposals.early:
                    self.proposals.propose_queued(
                        self.write_ready, int(time.time() * 1000), self.ready.disk_full
                    )
                    self.ready.drain()
                if now - self._view_built_at >= _VIEW_REFRESH_S:
                    self.view = self._build_view()
                    self._view_built_at = now
                    self.snapshots.expire(now, self.node)
        except BaseException:
            _log.exception("the raft loop failed; the node stops")
            self.failed = True
            self.stopping.set()
            raise

    # ------------------------------------------------------------------ ReadyListener

    def send(self, messages: Sequence[Message]) -> None:
        """The handler's transport: the peer transport, noting the snapshots sent."""
        self.snapshots.sent(messages, time.monotonic())
        self._send(messages)

    def role_changed(self, ready: Ready) -> None:
        assert ready.soft_state is not None
        if ready.soft_state.role is Role.LEADER:
            term = self.node.term
            self._term_start_index = next(
                (e.index for e in ready.entries if e.term == term),
                self.raft_log.last_index() + 1,
            )
            _log.info("leader in term %d from index %d", term, self._term_start_index)
        elif self.write_ready or self.proposals.deferred:
            self.write_ready = False
            self.proposals.lost_leadership()
        self.view = self._build_view()
        if self.view.leader_id is not None:
            self.leader_lost_at = None
        elif self.leader_lost_at is None:
            self.leader_lost_at = time.monotonic()
        with self.leader_changed:
            self.leader_changed.notify_all()

    def applied(self, entries: Sequence[Entry]) -> None:
        if self._replay_to and self.ready.applied_index >= self._replay_to:
            _log.info(
                "replayed entries %d..%d in %.3f s",
                self._replay_from + 1,
                self._replay_to,
                time.monotonic() - self._replay_began,
            )
            self._replay_to = 0
        self.proposals.applied(entries)
        with self.visible:
            self.visible.notify_all()

    def advanced(self, ready: Ready) -> None:
        if self._on_advanced is not None:
            self._on_advanced(ready)
        for read_state in ready.read_states:
            pending = self._reads.get(read_state.context)
            if pending is not None:
                self._reads[read_state.context] = (read_state.index, pending[1])
        if self._reads:
            for context, (index, future) in list(self._reads.items()):
                if index and self.ready.applied_index >= index:
                    del self._reads[context]
                    if not future.done():  # a caller may have cancelled it
                        future.set_result(index)
        if (
            not self.write_ready
            and self.node.role is Role.LEADER
            and self.ready.applied_index >= self._term_start_index
        ):
            # The inherited tail is committed and dispatched: queue offsets are final.
            self.store.reload_next_queue_offsets()
            self.write_ready = True
            self.proposals.release_deferred()
            with self.leader_changed:
                self.leader_changed.notify_all()

    # ------------------------------------------------------------------ leadership

    def not_leader_error(self) -> NotLeaderError:
        """NotLeaderError naming the leader this member knows (on the loop)."""
        leader = self.node.leader
        if leader is None or leader == self.settings.node_id:
            return NotLeaderError(None, None, self.node.term)
        return NotLeaderError(leader, self.settings.peer_addresses.get(leader), self.node.term)

    def transfer_leadership(self, target_id: str | None, timeout_s: float) -> ClusterView:
        """Ask the core to hand leadership to ``target_id`` (None: the best voter) and wait
        until the view shows another leader."""
        self._inbox.put(lambda: self.node.transfer_leadership(target_id))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            view = self.view
            if view.leader_id not in (None, self.settings.node_id) and (
                target_id is None or view.leader_id == target_id
            ):
                return view
            time.sleep(0.02)
        raise TransferFailedError(
            f"leadership did not move within {timeout_s:.1f} s (it may still)"
        )

    def _build_view(self) -> ClusterView:
        settings = self.settings
        recent_s = settings.election_ticks * settings.tick_ms / 1000
        now = time.monotonic()
        return build_cluster_view(
            self.node.status(),
            node_id=settings.node_id,
            cluster_id=settings.cluster_id,
            peer_addresses=settings.peer_addresses,
            applied_index=self.ready.applied_index,
            active_peers=frozenset(p for p, at in self._last_heard.items() if now - at < recent_s),
        )


def _usable_checkpoint(
    settings: ReplicaSettings, raft_log: RaftLogStorage
) -> applied_state.AppliedState | None:
    if not settings.applied_state_path:
        return None
    saved = applied_state.load(OsFileSystem(), settings.applied_state_path)
    return applied_state.usable(saved, raft_log)


def _raft_config(
    settings: ReplicaSettings, checkpoint: applied_state.AppliedState | None
) -> Config:
    return Config(
        node_id=settings.node_id,
        election_ticks=settings.election_ticks,
        heartbeat_ticks=settings.heartbeat_ticks,
        max_uncommitted_bytes=settings.max_inflight_bytes,
        preferred_leader=settings.preferred_leader,
        # A lone write: one APPEND and one ack per follower, and followers apply after
        # acknowledging the next write, not in its way (raft/config.py).
        announce_commit_on_tick=True,
        applied_index=checkpoint.index if checkpoint else 0,
        applied_conf_state=checkpoint.conf_state if checkpoint else None,
    )


__all__ = ["Replica", "ReplicaSettings"]
