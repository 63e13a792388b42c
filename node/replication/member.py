"""RaftMember: the running pieces of one Raft-mode node, opened, started and stopped together.

Start order: finish a snapshot install a crash interrupted, open the store (recovering it;
readers see only what was committed before), open the Raft log over the store's CommitLog,
then (``start``) the Raft loop. Stop order: hand leadership to the most up-to-date follower,
stop the loop and the peer transport, close the Raft log (syncing it) and the store.

Rules this module keeps: the store's dispatch bound is the replica's applied end, so nothing
uncommitted is ever visible; retention compacts the Raft log before the store deletes
segments (deleting an entry's bytes must follow Raft compaction).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import grpc

from raftlog.node.config import NodeConfig
from raftlog.node.control import CONTROL_QUEUE_ID, CONTROL_TOPIC
from raftlog.node.peer.segment_source import SegmentSource
from raftlog.node.peer.service import RaftPeerService
from raftlog.node.peer.transport import PeerTransport
from raftlog.node.replication.raft_entry import ENTRY_ENVELOPES
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.raft_write_path import RaftWritePath
from raftlog.node.replication.replica import Replica, ReplicaSettings
from raftlog.node.replication.snapshot_install import resume_interrupted_install
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.raft.types import ConfState
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import MessageStore

_log = logging.getLogger("raftlog.node")
_STAGING_SUBDIR = "commitlog.incoming"
PEER_SERVICE_NAME = peer_pb2.DESCRIPTOR.services_by_name["RaftPeer"].full_name


def _open_raft_log(store: MessageStore, root_dir: str, voters: Sequence[str]) -> RaftLogStorage:
    """The Raft log over ``store``'s CommitLog (truncations go through the store, so its
    ConsumeQueues and index follow)."""
    return RaftLogStorage(
        OsFileSystem(),
        root_dir,
        store.commit_log,
        bootstrap=ConfState(voters=tuple(sorted(voters))),
        truncate_commit_log=store.truncate_after,
    )


class RaftMember:
    peer_service_name = PEER_SERVICE_NAME

    def __init__(self, config: NodeConfig, store_host: tuple[str, int]) -> None:
        self._replica: Replica | None = None
        staging_dir = os.path.join(config.store_dir, _STAGING_SUBDIR)
        if resume_interrupted_install(OsFileSystem(), config.store_dir, staging_dir):
            _log.warning("finished a snapshot install that a crash had interrupted")
        self.store = MessageStore.open(
            config.store_config(),
            OsFileSystem(),
            store_host=store_host,
            dispatch_bound=self._dispatch_bound,
            envelopes=ENTRY_ENVELOPES,
            housekeeping_interval_ms=None,
        )
        try:
            # Local and identical on every replica: the control topic has one queue.
            self.store.create_topic(CONTROL_TOPIC, CONTROL_QUEUE_ID + 1)
            self.raft_log = _open_raft_log(self.store, config.store_dir, list(config.peers))
        except BaseException:
            self.store.close()
            raise
        peers = {p: a for p, a in config.peers.items() if p != config.node_id}
        self.transport = PeerTransport(config.cluster_id, peers, self._report_unreachable)
        self.replica = self._replica = Replica(
            ReplicaSettings(
                node_id=config.node_id,
                cluster_id=config.cluster_id,
                peer_addresses=dict(config.peers),
                tick_ms=config.tick_ms,
                election_ticks=config.election_ticks,
                heartbeat_ticks=config.heartbeat_ticks,
                fsync_before_ack=config.durability == "fsync",
                max_inflight_bytes=config.max_inflight_bytes,
                preferred_leader=config.preferred_leader,
                staging_dir=staging_dir,
            ),
            self.store,
            self.raft_log,
            self.transport.send,
        )
        self.write_path = RaftWritePath(self.replica)
        self._peer_service = RaftPeerService(
            config.cluster_id,
            self.replica.deliver,
            self.replica.report_peer_gone,
            SegmentSource(self.store.commit_log, self.replica.end_of_entry).fetch,
        )

    def _dispatch_bound(self) -> int:
        return self._replica.visible_end_physical_offset if self._replica is not None else 0

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

    def start(self) -> None:
        self.replica.start()

    def stop_replication(self) -> None:
        """Before the server stops: hand leadership over and stop the Raft loop."""
        self.replica.close()

    def close(self) -> None:
        """After the server stopped: the transport, then the Raft log and the store."""
        self.transport.close()
        try:
            self.raft_log.close()
        finally:
            self.store.close()
