"""RaftMember: the running pieces of one Raft-mode node, opened, started and stopped together.

Start order: finish a snapshot install a crash interrupted, open the store (recovering it;
readers see only what was committed before), learn the membership (the address book; a fresh
node with ``join`` asks the cluster to add it first: join.py), open the Raft log over the
store's CommitLog, then (``start``) the Raft loop (and, for a joined learner, its requests for
promotion). Stop order: hand leadership to the most up-to-date follower,
stop the loop and the peer transport, close the Raft log (syncing it) and the store.

Rules this module keeps: the store's dispatch bound is the replica's applied end, so nothing
uncommitted is ever visible; retention compacts the Raft log before the store deletes
segments (deleting an entry's bytes must follow Raft compaction); the control state a
follower's segment transfer asks for is read on the Raft loop, so the three tables agree with
one applied index; the peer transport dials exactly the members the applied membership names
(address_book.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

import grpc

from raftlog.node.config import NodeConfig
from raftlog.node.control import CONTROL_QUEUE_ID, CONTROL_TOPIC
from raftlog.node.messaging.delay import SCHEDULE_QUEUE_COUNT
from raftlog.node.peer.dialer import PeerDialer
from raftlog.node.peer.segment_source import SegmentSource
from raftlog.node.peer.service import RaftPeerService
from raftlog.node.peer.transport import PeerTransport
from raftlog.node.replication.address_book import AddressBook
from raftlog.node.replication.applied_state import APPLIED_STATE_FILE_NAME
from raftlog.node.replication.join import join_cluster, start_promotion
from raftlog.node.replication.membership_changes import MembershipChanges
from raftlog.node.replication.raft_entry import ENTRY_ENVELOPES
from raftlog.node.replication.raft_log_storage import (
    RAFT_STATE_DIR,
    RaftLogStorage,
    snapshot_point_path,
)
from raftlog.node.replication.raft_write_path import RaftWritePath
from raftlog.node.replication.replica import Replica, ReplicaSettings
from raftlog.node.replication.scheduler import Scheduler
from raftlog.node.replication.snapshot_install import resume_interrupted_install
from raftlog.node.replication.transactions import TransactionCoordinator
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.raft.types import ConfChange, ConfState, EntryType, Ready
from raftlog.store.control_state import ControlState
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.hashing import SCHEDULE_TOPIC
from raftlog.store.message_store import MessageStore

_log = logging.getLogger("raftlog.node")
_STAGING_SUBDIR = "commitlog.incoming"
# The peer senders' threads end as soon as their streams are cancelled; this bounds the wait.
_TRANSPORT_CLOSE_S = 1.0
_CONTROL_STATE_CAPTURE_TIMEOUT_S = 5.0
PEER_SERVICE_NAME = peer_pb2.DESCRIPTOR.services_by_name["RaftPeer"].full_name


def _open_raft_log(store: MessageStore, root_dir: str, bootstrap: ConfState) -> RaftLogStorage:
    """The Raft log over ``store``'s CommitLog (truncations go through the store, so its
    ConsumeQueues and index follow); ``bootstrap`` is a fresh log's membership."""
    return RaftLogStorage(
        OsFileSystem(),
        root_dir,
        store.commit_log,
        bootstrap=bootstrap,
        truncate_commit_log=store.truncate_after,
    )


def _membership_at_start(config: NodeConfig) -> tuple[AddressBook, ConfState]:
    """The address book, and the membership a fresh log starts from: a founding member's
    ``peers`` (all voters), or what the cluster reported to a joining one (join.py). A log
    that exists keeps its own membership (the bootstrap is then ignored)."""
    fs = OsFileSystem()
    root = config.store_dir
    fresh_log = not fs.exists(snapshot_point_path(root))
    if fresh_log and config.join_addresses:
        joined = join_cluster(config)
        book = AddressBook.create(fs, root, config.cluster_id, config.node_id, joined.addresses)
        return book, joined.conf_state
    stored = AddressBook.open(fs, root, config.cluster_id, config.node_id)
    book = stored or AddressBook.create(fs, root, config.cluster_id, config.node_id, config.peers)
    return book, ConfState(voters=tuple(sorted(config.peers)))


class RaftMember:
    peer_service_name = PEER_SERVICE_NAME

    def __init__(self, config: NodeConfig, store_host: tuple[str, int], dialer: PeerDialer) -> None:
        self._replica: Replica | None = None
        staging_dir = os.path.join(config.store_dir, _STAGING_SUBDIR)
        if resume_interrupted_install(OsFileSystem(), config.store_dir, staging_dir):
            _log.warning("finished a snapshot install that a crash had interrupted")
        self._open_logs(config, store_host)
        self._config = config
        self.transport = PeerTransport(
            config.cluster_id, self.book.peers(), self._report_unreachable, dialer
        )
        self.replica = self._replica = Replica(
            ReplicaSettings(
                node_id=config.node_id,
                cluster_id=config.cluster_id,
                peer_addresses=self.book.addresses,
                tick_ms=config.tick_ms,
                election_ticks=config.election_ticks,
                heartbeat_ticks=config.heartbeat_ticks,
                fsync_before_ack=config.durability == "fsync",
                max_inflight_bytes=config.max_inflight_bytes,
                preferred_leader=config.preferred_leader,
                staging_dir=staging_dir,
                dialer=dialer,
                applied_state_path=os.path.join(
                    config.store_dir, RAFT_STATE_DIR, APPLIED_STATE_FILE_NAME
                ),
            ),
            self.store,
            self.raft_log,
            self.transport.send,
            self._membership_applied,
        )
        self.write_path = RaftWritePath(self.replica)
        self.scheduler = Scheduler(self.replica)
        self.transactions = TransactionCoordinator(self.replica, config.transaction_settings())
        self.membership = MembershipChanges(self.replica, self.book)
        self._was_member = True
        self._peer_service = RaftPeerService(
            config.cluster_id,
            config.node_id,
            self._is_member,
            dialer.tls,
            self.replica.deliver,
            self.replica.report_peer_gone,
            SegmentSource(
                self.store.commit_log, self.replica.end_of_entry, self._control_state_from
            ).fetch,
        )

    def _open_logs(self, config: NodeConfig, store_host: tuple[str, int]) -> None:
        """Open the store (the CommitLog) and the Raft log over it, timing each."""
        began = time.monotonic()
        self.store = MessageStore.open(
            config.store_config(),
            OsFileSystem(),
            store_host=store_host,
            dispatch_bound=self._dispatch_bound,
            envelopes=ENTRY_ENVELOPES,
            housekeeping_interval_ms=None,
        )
        try:
            # Local and identical on every replica: the control topic has one queue, the
            # schedule topic one per delay level and the timer queue (messaging/delay.py).
            self.store.create_topic(CONTROL_TOPIC, CONTROL_QUEUE_ID + 1)
            self.store.create_topic(SCHEDULE_TOPIC, SCHEDULE_QUEUE_COUNT)
            opened = time.monotonic()
            _log.info(
                "store opened in %.3f s (commit log %d..%d, dispatched to %d)",
                opened - began,
                self.store.commit_log.min_offset,
                self.store.commit_log.max_offset,
                self.store.dispatched_physical_offset,
            )
            self.book, bootstrap = _membership_at_start(config)
            self.raft_log = _open_raft_log(self.store, config.store_dir, bootstrap)
            hard_state, _ = self.raft_log.initial_state()
            _log.info(
                "raft log opened in %.3f s (entries %d..%d, commit %d)",
                time.monotonic() - opened,
                self.raft_log.first_index(),
                self.raft_log.last_index(),
                hard_state.commit,
            )
        except BaseException:
            self.store.close()
            raise

    def _control_state_from(self, log_index: int) -> tuple[int, ControlState] | None:
        """This member's applied index and control state, when it applied ``log_index`` or
        more (a follower's segment transfer; any thread, read on the Raft loop)."""
        replica = self.replica

        def capture() -> tuple[int, ControlState] | None:
            applied_index = replica.ready.applied_index
            if applied_index < log_index:
                return None
            return applied_index, replica.store.control_state()

        captured = replica.run_on_loop(capture, _CONTROL_STATE_CAPTURE_TIMEOUT_S)
        assert captured is None or isinstance(captured, tuple)
        return captured

    def _dispatch_bound(self) -> int:
        return self._replica.visible_end_physical_offset if self._replica is not None else 0

    def _membership_applied(self, ready: Ready) -> None:
        """On the Raft loop, after each Ready: learn the addresses its membership changes
        carry, dial the members they name, and say so when this node was removed."""
        changes = []
        for entry in ready.committed_entries:
            if entry.type is EntryType.CONF_CHANGE:
                with contextlib.suppress(ValueError):  # the core ignores a malformed one too
                    changes.append(ConfChange.decode(entry.data))
        if not changes and ready.snapshot is None:
            return
        conf_state = self.replica.node.conf_state
        if self.book.apply(changes, conf_state):
            self.transport.set_peers(self.book.peers())
        own_id = self._config.node_id
        is_member = own_id in conf_state.voters or own_id in conf_state.learners
        if self._was_member and not is_member:
            _log.warning("%s was removed from the cluster: it no longer votes; stop it", own_id)
        self._was_member = is_member

    def _is_member(self, node_id: str) -> bool:
        """Whether ``node_id`` is a current member (any thread: the book is only read)."""
        return self.book.addresses.get(node_id) is not None

    def _report_unreachable(self, peer_id: str) -> None:
        if self._replica is not None:
            self._replica.report_unreachable(peer_id)

    def add_peer_service(self, server: grpc.Server) -> None:
        peer_pb2_grpc.add_RaftPeerServicer_to_server(self._peer_service, server)  # type: ignore[no-untyped-call]

    @property
    def failed(self) -> bool:
        return self.replica.failed

    def run_retention(self) -> None:
        self.replica.run_retention()

    def save_applied_state(self) -> None:
        """Checkpoint what the Raft loop applied, so a restart replays only what follows
        (applied_state.py); the node's housekeeping calls it every second."""
        self.replica.save_applied_state()

    def drop_caches(self, timeout_s: float = 5.0) -> None:
        """Drop the Raft log's in-memory entries (the node's housekeeping, once idle)."""
        self.replica.run_on_loop(self.replica.raft_log.forget_recent, timeout_s)

    def start(self) -> None:
        self.replica.start()
        self.scheduler.start()
        self.transactions.start()
        if self._config.join_addresses:
            # A learner that joined (now, or before a restart) asks to become a voter.
            start_promotion(self._config, lambda: self.replica.view, self.replica.stopping)

    def stop_replication(self, handover_s: float = 3.0) -> None:
        """Before the server stops: stop delivering delayed messages and checking transactions
        back, hand leadership over (within ``handover_s``) and stop the Raft loop."""
        self.scheduler.close()
        self.transactions.close()
        self.replica.close(handover_s)

    def close(self) -> None:
        """After the server stopped: the transport (its streams cancelled, so a frozen peer
        costs no wait), then the Raft log and the store."""
        self.transport.close(_TRANSPORT_CLOSE_S)
        try:
            try:
                # The loop has stopped: the final applied state, so the next start replays
                # nothing (a failure only costs that start a replay).
                self.replica.save_applied_state()
            except Exception:
                _log.exception("the applied-state checkpoint was not written at stop")
            self.raft_log.close()
        finally:
            self.store.close()
