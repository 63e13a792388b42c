"""serve(config): run one raftlog node in this process until SIGTERM or SIGINT.

A node is its replication member (node/replication/member.py for replication = "raft",
node/masterslave/group.py for "master-slave"), which opens the store and everything that
replicates it, plus the gRPC server and a housekeeping thread. Start order: the member
(recovering the store: readers see only what was committed before), then the server; then
SERVING, and the metrics endpoint when ``metrics_listen`` is set (its port is bound before
anything starts, like the gRPC port). Stop order (graceful, on SIGTERM/SIGINT): NOT_SERVING,
the member's replication (a Raft leader hands leadership over first), the server, the metrics
endpoint, then the member's files (syncing them; the store writes its checkpoint and
clean-stop marker). It keeps within ``stop_grace_ms`` whatever peers and clients do.

Rules this module keeps: a housekeeping thread checkpoints the store and, in Raft mode, the
applied state every second (they bound what recovery re-dispatches and re-applies) and every
few seconds asks the member to run retention (the
store never runs retention on its own in a node: in Raft mode deleting an entry's bytes must
follow Raft compaction). Once a tick passes without a write, it gives memory back (node/heap.py:
the Raft log's entry cache, then ``malloc_trim``); ``serve`` caps malloc's arenas first.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import time
from types import FrameType

from raftlog.node.config import NodeConfig, parse_address
from raftlog.node.heap import IdleMemory, limit_arenas
from raftlog.node.masterslave.group import MasterSlaveMember
from raftlog.node.metrics import NodeMetrics
from raftlog.node.peer.dialer import PeerDialer
from raftlog.node.replication.member import RaftMember
from raftlog.node.replication.replica import Replica
from raftlog.node.security.access import AccessPolicy
from raftlog.node.security.tls import node_tls
from raftlog.node.security.tokens import TokenFile
from raftlog.node.server import NodeServer
from raftlog.node.services.limits import DEFAULT_PULL_MESSAGES, ServiceLimits

_log = logging.getLogger("raftlog.node")
_CHECKPOINT_INTERVAL_S = 1.0
# Retention runs every this many checkpoints (RocketMQ checks every 10 s).
_RETENTION_EVERY_CHECKPOINTS = 5
# Peer streams never end on their own, so stop always waits this long: keep it short.
_SERVER_GRACE_S = 0.5
# A stopping leader's handover takes at most this long (and what the grace leaves it)...
_HANDOVER_MAX_S = 3.0
# ... which keeps this much of stop_grace_ms for the servers' grace, the peer streams' close
# and syncing the files.
_STOP_RESERVE_S = 1.5


def _store_host(address: str) -> tuple[str, int]:
    """The IP and port stamped into records (offset message ids need an IP literal)."""
    host, port = parse_address(address, "advertise_address")
    try:
        return socket.gethostbyname(host), port
    except OSError:
        return "127.0.0.1", port


def service_limits(config: NodeConfig) -> ServiceLimits:
    """The client services' limits a node's configuration sets."""
    return ServiceLimits(
        max_write_timeout_s=config.max_write_timeout_ms / 1000,
        message_limits=config.store_config().limits,
        max_topic_queue_count=config.max_topic_queue_count,
        max_topic_count=config.max_topic_count,
        max_produce_request_bytes=config.max_produce_request_bytes,
        max_produce_message_count=config.max_produce_message_count,
        max_inflight_produce_count=config.max_inflight_produce_count,
        max_pull_messages=config.max_pull_message_count,
        # The default batch stays 32 unless the cap is set lower.
        default_pull_messages=min(DEFAULT_PULL_MESSAGES, config.max_pull_message_count),
        delay=config.delay_settings(),
        consumer_lock_lease_ms=config.consumer_lock_lease_ms,
    )


class Node:
    """One running node: what ``serve`` starts and stops (tests use it in-process too)."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        store_host = _store_host(config.advertise_address or config.listen_address)
        tls = node_tls(config)
        dialer = PeerDialer(config.peer_addresses, tls.peer_channel_credentials if tls else None)
        self.member: RaftMember | MasterSlaveMember = (
            MasterSlaveMember(config, store_host, dialer)
            if config.replication == "master-slave"
            else RaftMember(config, store_host, dialer)
        )
        self.store = self.member.store
        member = self.member
        self._idle_memory = IdleMemory(
            member.drop_caches if isinstance(member, RaftMember) else lambda: None
        )
        limits = service_limits(config)
        self.metrics: NodeMetrics | None = None
        try:
            if config.metrics_listen is not None:
                advertised_host, _ = parse_address(config.advertised, "advertise_address")
                self.metrics = NodeMetrics(
                    config.metrics_listen, advertised_host, self.store, self.member.write_path
                )
            self.server = NodeServer(
                config.listen_address,
                config.peer_listen_address,
                self.store,
                self.member.write_path,
                self.member.add_peer_service,
                self.member.peer_service_name,
                limits,
                self.member.membership if isinstance(self.member, RaftMember) else None,
                self.metrics,
                tls,
                TokenFile(config.auth_tokens_file) if config.auth_tokens_file else None,
                AccessPolicy(self.store.access_rules, config.superusers)
                if config.acl_enable
                else None,
                self.member.transactions if isinstance(self.member, RaftMember) else None,
            )
        except BaseException:
            if self.metrics is not None:
                self.metrics.stop()
            self.member.close()
            raise
        self._stopped = threading.Event()
        self._housekeeper = threading.Thread(
            target=self._housekeep, name="housekeeping", daemon=True
        )

    @property
    def replica(self) -> Replica:
        """The Raft replica (replication = "raft" only)."""
        assert isinstance(self.member, RaftMember), "a master-slave node has no Raft replica"
        return self.member.replica

    def _housekeep(self) -> None:
        ticks = 0
        while not self._stopped.wait(_CHECKPOINT_INTERVAL_S):
            ticks += 1
            try:
                self.store.periodic_checkpoint()
                if isinstance(self.member, RaftMember):
                    self.member.save_applied_state()
                if ticks % _RETENTION_EVERY_CHECKPOINTS == 0:
                    self.member.run_retention()
                self._idle_memory.tick(self.store.commit_log.max_offset)
            except TimeoutError:
                _log.warning("housekeeping: the raft loop did not answer in time; next second")
            except Exception:
                _log.exception("housekeeping failed")

    def start(self) -> None:
        self.member.start()
        self.server.start()
        if self.metrics is not None:
            self.metrics.start()
            _log.info("node %s serves metrics at %s", self.config.node_id, self.metrics.url)
        self._housekeeper.start()
        _log.info(
            "node %s serving on %s, peers on %s (cluster %s, %s, peers %s)",
            self.config.node_id,
            self.config.listen_address,
            self.config.peer_listen_address,
            self.config.cluster_id,
            self.config.replication,
            ",".join(sorted(self.config.peers)),
        )

    def stop(self) -> None:
        """Graceful stop within ``stop_grace_ms`` whatever peers and clients do (a frozen
        peer, open streams, long polls): the handover gets what the rest does not need
        (``_STOP_RESERVE_S``, at most ``_HANDOVER_MAX_S``), the servers ``_SERVER_GRACE_S``,
        and the peer streams are cancelled, not waited for."""
        started = time.monotonic()
        grace_s = self.config.stop_grace_ms / 1000
        self._stopped.set()
        self.member.stop_replication(
            handover_s=min(_HANDOVER_MAX_S, max(0.0, grace_s - _STOP_RESERVE_S))
        )
        left_s = grace_s - (time.monotonic() - started)
        self.server.stop(max(0.0, min(_SERVER_GRACE_S, left_s - _STOP_RESERVE_S / 2)))
        if self.metrics is not None:
            self.metrics.stop()
        self._housekeeper.join()
        self.member.close()
        _log.info("node %s stopped in %.2f s", self.config.node_id, time.monotonic() - started)


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
    limit_arenas()
    sys.setswitchinterval(config.switch_interval_us / 1_000_000)
    node = Node(config)
    node.start()
    while not stop.wait(1.0):
        if node.member.failed:
            _log.error("node %s stops: its Raft loop failed (see above)", config.node_id)
            break
    node.stop()
    return 1 if node.member.failed else 0
