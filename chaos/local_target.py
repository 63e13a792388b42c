"""LocalTarget: the chaos :class:`~raftlog.chaos.target.Target` over a cluster of real node
processes on 127.0.0.1 (raftlog.testing.local_cluster.LocalCluster), with link proxies
between the nodes for network faults.

Rules this module keeps:
- Only processes the target started are signalled, by PID, and only while LocalCluster
  still recognises the PID as our node (a recycled PID is never touched).
- ``close`` always heals, resumes every paused node (a stopped process would ignore SIGTERM)
  and stops the cluster; it is safe to call twice.
- Servers listen on 127.0.0.1 only (LocalCluster's rule).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Collection, Sequence
from pathlib import Path

import grpc

from raftlog.chaos.history import ReplicaSnapshot
from raftlog.chaos.link_proxy import ProxyMesh
from raftlog.chaos.target import (
    Link,
    NodeView,
    TargetError,
    commitlog_digest,
    node_status,
    read_queues,
    release_faults,
)
from raftlog.client import Connection
from raftlog.testing.local_cluster import LocalCluster
from raftlog.testing.local_controllers import LocalControllers


class LocalTarget:
    """A LocalCluster of ``node_count`` node processes under ``base_dir`` (free ports).

    ``extra_args`` go to every node's command line. With ``partitions``, every node reaches
    every other through a userspace link proxy (chaos/link_proxy.py: one per directed pair),
    so links can be dropped or blackholed; clients still use the real addresses (though a
    leader hint from a follower names that follower's proxy to the leader, so a redirected
    client shares that link's fate). Under a controller, each node also dials each controller
    member through a proxy (links "n1->c1" ...; ``controller_ids`` names the members), so a
    partition can cut a master off from its controller.
    """

    name = "local"

    def __init__(
        self,
        base_dir: str | Path,
        node_count: int = 3,
        *,
        durability: str = "fsync",
        replication: str = "raft",
        master_role: str = "SYNC_MASTER",
        controlled: bool = False,
        extra_args: Sequence[str] = (),
        start_timeout_s: float = 60.0,
        partitions: bool = False,
    ) -> None:
        controllers = LocalControllers(os.path.abspath(base_dir)) if controlled else None
        self.cluster = LocalCluster(
            str(base_dir),
            node_count,
            base_port=0,
            durability=durability,
            replication=replication,
            master_role=master_role,
            controllers=controllers,
            extra_args=extra_args,
        )
        self.start_timeout_s = start_timeout_s
        self.supports_partitions = self.supports_latency = partitions
        self.supports_client_partitions = partitions
        self.controller_ids: tuple[str, ...] = ()
        self.mesh: ProxyMesh | None = None
        if partitions:
            members = controllers.members if controllers is not None else []
            self.mesh = ProxyMesh(
                {n: node.address for n, node in self.cluster.nodes.items()},
                {m.member_id: m.grpc_address for m in members},
                {n: node.peer_address for n, node in self.cluster.nodes.items()},
            )
            self.controller_ids = tuple(m.member_id for m in members)
            self.cluster.peer_overrides = {n: self.mesh.peers_for(n) for n in self.cluster.nodes}
            self.cluster.peer_port_overrides = {
                n: self.mesh.peer_addresses_for(n) for n in self.cluster.nodes
            }
            self.cluster.controller_overrides = {
                n: ",".join(self.mesh.services_for(n)) for n in self.cluster.nodes
            }
        self._paused: set[str] = set()
        self._closed = False

    # -- membership ------------------------------------------------------------------------

    def node_ids(self) -> list[str]:
        return list(self.cluster.nodes)

    def connect(self) -> Connection:
        if self.mesh is None:
            return Connection(self.cluster.addresses)
        return Connection(self.cluster.addresses, address_map=self.mesh.client_address_map())

    def address_of(self, node_id: str) -> str:
        """The node's real client address."""
        return self.cluster.nodes[node_id].address

    def pid_of(self, node_id: str) -> int | None:
        """The node's process id while the process we started runs, else None."""
        node = self.cluster.nodes[node_id]
        return node.pid if self.cluster.running(node_id) else None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.cluster.start(self.start_timeout_s)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        release_faults(self, self._paused)
        try:
            self.cluster.stop(timeout_s=10.0)
        finally:
            if self.mesh is not None:
                self.mesh.close()

    # -- process faults --------------------------------------------------------------------

    def kill(self, node_id: str) -> None:
        if self.pid_of(node_id) is None:
            raise TargetError(f"{node_id} is not running")
        self.cluster.kill(node_id)
        self._paused.discard(node_id)

    def restart(self, node_id: str) -> None:
        if node_id in self._paused:
            self.resume(node_id)  # a stopped process would not see the SIGTERM
        try:
            self.cluster.restart(node_id, wait_timeout_s=self.start_timeout_s)
        except Exception as error:  # ClusterError and OSError: report, don't crash the run
            raise TargetError(f"restart of {node_id} failed: {error}") from error

    def _send_signal(self, node_id: str, signum: signal.Signals) -> None:
        pid = self.pid_of(node_id)
        if pid is None:
            raise TargetError(f"{node_id} is not running (no process of ours to signal)")
        try:
            os.kill(pid, signum)
        except ProcessLookupError as error:
            raise TargetError(f"{node_id} (pid {pid}) exited") from error

    def pause(self, node_id: str) -> None:
        self._send_signal(node_id, signal.SIGSTOP)
        self._paused.add(node_id)

    def resume(self, node_id: str) -> None:
        self._paused.discard(node_id)
        self._send_signal(node_id, signal.SIGCONT)

    # -- network faults --------------------------------------------------------------------

    def block(self, links: Collection[Link], *, silent: bool = False) -> None:
        self._links_of_mesh(links).block(links, "blackhole" if silent else "drop")

    def delay(self, links: Collection[Link], delay_ms: int) -> None:
        try:
            self._links_of_mesh(links).block(links, "delay", delay_ms)
        except ValueError as error:
            raise TargetError(str(error)) from error

    def _links_of_mesh(self, links: Collection[Link]) -> ProxyMesh:
        if self.mesh is None:
            raise TargetError("this local target was started without link proxies")
        unknown = [link for link in links if link not in self.mesh.links]
        if unknown:
            raise TargetError(f"no such link: {unknown[0][0]} -> {unknown[0][1]}")
        return self.mesh

    def heal(self) -> None:
        if self.mesh is not None:
            self.mesh.heal()

    # -- observation -----------------------------------------------------------------------

    def status(self, node_id: str) -> NodeView | None:
        if node_id in self._paused or self.pid_of(node_id) is None:
            return None  # don't wait out a timeout on a node we know cannot answer
        view = node_status(self.address_of(node_id))
        # A pinned call can still be answered by another member when this one is down.
        return view if view is not None and view.node_id == node_id else None

    def read_replica(self, node_id: str, topic: str) -> ReplicaSnapshot:
        try:
            queues = read_queues(self.address_of(node_id), topic)
            digest, size_bytes = commitlog_digest(self.cluster.nodes[node_id].data_dir)
        except (grpc.RpcError, OSError):
            return ReplicaSnapshot(node_id=node_id)  # unreadable: left out of comparisons
        return ReplicaSnapshot(
            node_id=node_id, queues=queues, commitlog_digest=digest, commitlog_bytes=size_bytes
        )

    def log_tail(self, node_id: str) -> str:
        """The end of the node's log, for error messages."""
        return self.cluster.log_tail(node_id)
