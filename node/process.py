"""serve(config): run one raftlog node in this process until SIGTERM or SIGINT.

Start order: open the store (recovering it; readers see only what was committed before),
open the Raft log over the store's CommitLog, start the Raft loop, the peer transport and the
gRPC server; then report SERVING. Stop order (graceful, on SIGTERM/SIGINT): NOT_SERVING, hand
leadership to the most up-to-date follower, stop the loop, the server, the transport, then
close the Raft log (syncing it) and the store (checkpoint, clean-stop marker).

Rules this module keeps: the store's dispatch bound is the replica's applied end, so nothing
uncommitted is ever visible; a housekeeping thread checkpoints the store every second (it
bounds what recovery re-dispatches) and every few seconds asks the replica to run retention,
which compacts the Raft log before the store deletes segments (the store never runs retention
on its own in a node: deleting an entry's bytes must follow Raft compaction).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from raftlog.node.config import NodeConfig, parse_address
from raftlog.node.peer.segment_source import SegmentSource
from raftlog.node.peer.service import RaftPeerService
from raftlog.node.peer.transport import PeerTransport
from raftlog.node.replication.control import CONTROL_QUEUE_ID, CONTROL_TOPIC
from raftlog.node.replication.raft_entry import ENTRY_ENVELOPES
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.raft_write_path import RaftWritePath
from raftlog.node.replication.replica import Replica, ReplicaSettings
from raftlog.node.replication.snapshot_install import resume_interrupted_install
from raftlog.node.server import NodeServer
from raftlog.node.services.limits import ServiceLimits
from raftlog.raft.types import ConfState
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import MessageStore

_log = logging.getLogger("raftlog.node")
_CHECKPOINT_INTERVAL_S = 1.0
# Retention runs every this many checkpoints (RocketMQ checks every 10 s).
_RETENTION_EVERY_CHECKPOINTS = 5
_STAGING_SUBDIR = "commitlog.incoming"
# Peer streams never end on their own, so stop always waits this long: keep it short.
_SERVER_GRACE_S = 0.5


def _store_host(address: str) -> tuple[str, int]:
    """The IP and port stamped into records (offset message ids need an IP literal)."""
    host, port = parse_address(address, "advertise_address")
    try:
        return socket.gethostbyname(host), port
    except OSError:
        return "127.0.0.1", port


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


class Node:
    """One running node: what ``serve`` starts and stops (tests use it in-process too)."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        advertise = config.advertise_address or config.listen_address
        self._replica: Replica | None = None
        staging_dir = os.path.join(config.store_dir, _STAGING_SUBDIR)
        if resume_interrupted_install(OsFileSystem(), config.store_dir, staging_dir):
            _log.warning("finished a snapshot install that a crash had interrupted")
        self.store = MessageStore.open(
            config.store_config(),
            OsFileSystem(),
            store_host=_store_host(advertise),
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
        limits = ServiceLimits(
            max_write_timeout_s=config.max_write_timeout_ms / 1000,
            message_limits=config.store_config().limits,
        )
        self.server = NodeServer(
            config.listen_address,
            self.store,
            RaftWritePath(self.replica),
            RaftPeerService(
                config.cluster_id,
                self.replica.deliver,
                self.replica.report_peer_gone,
                SegmentSource(self.store.commit_log, self.replica.end_of_entry).fetch,
            ),
            limits,
        )
        self._stopped = threading.Event()
        self._housekeeper = threading.Thread(
            target=self._housekeep, name="housekeeping", daemon=True
        )

    def _dispatch_bound(self) -> int:
        return self._replica.visible_end_physical_offset if self._replica is not None else 0

    def _report_unreachable(self, peer_id: str) -> None:
        if self._replica is not None:
            self._replica.report_unreachable(peer_id)

    def _housekeep(self) -> None:
        ticks = 0
        while not self._stopped.wait(_CHECKPOINT_INTERVAL_S):
            ticks += 1
            try:
                self.store.checkpoint()
                if ticks % _RETENTION_EVERY_CHECKPOINTS == 0:
                    self.replica.run_retention()
            except Exception:
                _log.exception("housekeeping failed")

    def start(self) -> None:
        self.replica.start()
        self.server.start()
        self._housekeeper.start()
        _log.info(
            "node %s serving on %s (cluster %s, peers %s)",
            self.config.node_id,
            self.config.listen_address,
            self.config.cluster_id,
            ",".join(sorted(self.config.peers)),
        )

    def stop(self) -> None:
        self._stopped.set()
        self.replica.close()
        self.server.stop(_SERVER_GRACE_S)
        self.transport.close()
        self._housekeeper.join()
        try:
            self.raft_log.close()
        finally:
            self.store.close()
        _log.info("node %s stopped", self.config.node_id)


def serve(config: NodeConfig) -> int:
    """Run a node until SIGTERM/SIGINT; returns the process exit code."""
    logging.basicConfig(
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.setswitchinterval(config.switch_interval_us / 1_000_000)
    node = Node(config)
    node.start()
    while not stop.wait(1.0):
        if node.replica.failed:
            _log.error("node %s stops: its Raft loop failed (see above)", config.node_id)
            break
    node.stop()
    return 1 if node.replica.failed else 0
