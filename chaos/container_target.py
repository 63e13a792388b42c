"""ContainerTarget: the chaos :class:`~raftlog.chaos.target.Target` over a cluster of
``raftlog:dev`` containers (raftlog.testing.RaftlogCluster), driven from the host.

Faults map onto Docker:

- ``kill``: SIGKILL the container (it stays, with its volume); ``restart``: start it again, or
  ``docker restart`` (SIGTERM, then start) when it runs;
- ``pause`` / ``resume``: the cgroup freezer (TCP handshakes still complete, nothing answers);
- ``block`` of the directed link (a, b): an iptables rule in b's network namespace, applied
  from the host with nsenter, on TCP segments from a's address to the node port. a's
  connections to b fail (``silent``: DROP, noticed only by timeouts; else REJECT with a TCP
  reset, an immediate refusal) while b's connections to a, and every host client (they arrive
  through Docker's port publishing, from the bridge gateway), still pass: the same
  semantics as the local target's link proxies. Under a controller (``controlled``), the
  link (node, c1) is the same rule in controller member c1's namespace, on its gRPC port: a
  partition can cut a master off from its controller.

Rules this module keeps:
- Everything the cluster creates carries its run label and ``close`` removes it; ``close``
  heals, unpauses and is safe to call twice.
- ``heal`` removes every rule ``block`` added. A node killed and started since then lost its
  rules with its network namespace, so a failed removal is expected and ignored; a node that
  restarts may get a new address, so rules are resolved at ``block`` time, never cached.
- A paused or killed node's status is None at once, without waiting out a timeout.
- Replicas are read through each node's published port (Pull pinned to that member) and
  digested inside the container by the local target's own ``commitlog_digest``, so the two
  targets' digests mean the same.
- Import contract: chaos may see raftlog.testing only here (pyproject.toml says why).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import grpc

from raftlog.chaos.history import ReplicaSnapshot
from raftlog.chaos.target import (
    Link,
    NodeView,
    TargetError,
    read_queues,
    release_faults,
    status_view,
)
from raftlog.client import Connection
from raftlog.testing import ClusterError, RaftlogCluster, docker_available
from raftlog.testing.cluster import DATA_DIR, NODE_PORT
from raftlog.testing.container_controllers import GRPC_PORT as CONTROLLER_PORT
from raftlog.testing.container_controllers import MEMBER_IDS as CONTROLLER_IDS
from raftlog.testing.docker_objects import image_present

_DIGEST_SCRIPT = (
    f"from raftlog.chaos.target import commitlog_digest; print(*commitlog_digest({DATA_DIR!r}))"
)
_STATUS_TIMEOUT_S = 0.5
_SAVED_LOG_LINES = 100_000


class ContainerTarget:
    """A :class:`RaftlogCluster` of ``node_count`` containers of ``image``.

    ``env`` adds ``RAFTLOG_*`` settings for every node (``durability`` sets
    ``RAFTLOG_DURABILITY``); ``replication`` "master-slave" makes n1 the master
    (``master_role``) and the others its slaves. ``log_dir``: where ``close`` saves each node's log
    (``<node>.log``) before the containers go. Partitions need root, ``nsenter`` and
    ``iptables`` on the host.
    """

    name = "containers"
    supports_partitions = True
    # Latency needs netem, which this kernel lacks, or a proxy between the containers.
    supports_latency = False
    supports_client_partitions = False
    controller_ids: tuple[str, ...] = ()

    def __init__(
        self,
        image: str,
        node_count: int = 3,
        *,
        durability: str = "fsync",
        replication: str = "raft",
        master_role: str = "SYNC_MASTER",
        controlled: bool = False,
        env: Mapping[str, str] | None = None,
        start_timeout_s: float = 120.0,
        log_dir: Path | None = None,
    ) -> None:
        reason = docker_available()
        if reason is not None:
            raise TargetError(f"the containers target needs Docker: {reason}")
        if not image_present(image):
            raise TargetError(f"no image {image!r} in Docker: build it first (make image)")
        self.cluster = RaftlogCluster(
            image,
            nodes=node_count,
            env={"RAFTLOG_DURABILITY": durability, **(env or {})},
            start_timeout_s=start_timeout_s,
            replication=replication,
            master_role=master_role,
            controlled=controlled,
        )
        self.controller_ids = CONTROLLER_IDS if controlled else ()
        self._paused: set[str] = set()
        self._killed: set[str] = set()
        # (node whose namespace holds the rule, the rule) for every block in force.
        self._rules: list[tuple[str, list[str]]] = []
        self._log_dir = log_dir
        self._closed = False

    # -- membership ------------------------------------------------------------------------

    def node_ids(self) -> list[str]:
        return self.cluster.node_ids

    def connect(self) -> Connection:
        return self.cluster.connection()

    def host_address(self, node_id: str) -> str:
        """Where the host reaches the node (its published port)."""
        return self.cluster.address_map[f"{node_id}:{NODE_PORT}"]

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self.cluster.start()
        except (ClusterError, OSError) as error:
            raise TargetError(f"the container cluster did not start: {error}") from error

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        release_faults(self, self._paused)
        try:
            self._save_logs()
        finally:
            self.cluster.close()

    def _save_logs(self) -> None:
        if self._log_dir is None:
            return
        self._log_dir.mkdir(parents=True, exist_ok=True)
        for node_id in self.cluster.nodes:
            with contextlib.suppress(Exception):  # a log is a courtesy, never a failure
                log = self.cluster.logs(node_id, tail=_SAVED_LOG_LINES)
                (self._log_dir / f"{node_id}.log").write_text(log, encoding="utf-8")

    # -- process faults --------------------------------------------------------------------

    @staticmethod
    def _docker_call(what: str, action: Callable[[], object]) -> None:
        # The docker SDK raises its own (untyped) errors; any of them means the fault failed.
        try:
            action()
        except Exception as error:
            raise TargetError(f"{what} failed: {error}") from error

    def kill(self, node_id: str) -> None:
        if node_id in self._killed:
            raise TargetError(f"{node_id} is not running")
        self._docker_call(f"kill {node_id}", lambda: self.cluster.kill(node_id))
        self._killed.add(node_id)
        self._paused.discard(node_id)

    def restart(self, node_id: str) -> None:
        if node_id in self._paused:
            self.resume(node_id)  # a frozen container would not see the SIGTERM
        if node_id in self._killed:
            self._docker_call(f"start {node_id}", lambda: self.cluster.start_node(node_id))
            self._killed.discard(node_id)
        else:
            self._docker_call(f"restart {node_id}", lambda: self.cluster.restart(node_id))

    def pause(self, node_id: str) -> None:
        if node_id in self._killed:
            raise TargetError(f"{node_id} is not running")
        self._docker_call(f"pause {node_id}", lambda: self.cluster.pause(node_id))
        self._paused.add(node_id)

    def resume(self, node_id: str) -> None:
        self._paused.discard(node_id)
        self._docker_call(f"unpause {node_id}", lambda: self.cluster.unpause(node_id))

    # -- network faults --------------------------------------------------------------------

    def block(self, links: Collection[Link], *, silent: bool = False) -> None:
        self.heal()
        nodes = set(self.node_ids())
        unknown = [
            (a, b) for a, b in links if a not in nodes or b not in nodes | set(self.controller_ids)
        ]
        if unknown:
            raise TargetError(f"no such link: {unknown[0][0]} -> {unknown[0][1]}")
        verdict = ["DROP"] if silent else ["REJECT", "--reject-with", "tcp-reset"]
        for source, target in sorted(links):
            source_ip = self._address(source)
            port = NODE_PORT if target in nodes else CONTROLLER_PORT
            rule = ["INPUT", "-s", source_ip, "-p", "tcp", "--dport", str(port), "-j"]
            rule += verdict
            try:
                self.cluster.iptables(target, "-A", *rule)
            except (ClusterError, KeyError) as error:
                raise TargetError(f"block {source} -> {target} failed: {error}") from error
            self._rules.append((target, rule))

    def delay(self, links: Collection[Link], delay_ms: int) -> None:
        raise TargetError("the containers target cannot slow links (no netem here)")

    def _address(self, node_id: str) -> str:
        try:
            address = self.cluster.container_ip(node_id)
        except Exception as error:  # the docker SDK's errors are untyped
            raise TargetError(f"no address for {node_id}: {error}") from error
        if not address:
            raise TargetError(f"{node_id} has no address on the cluster network (stopped?)")
        return address

    def heal(self) -> None:
        rules, self._rules = self._rules, []
        for node_id, rule in rules:
            # Gone with the namespace when the node was killed or restarted since.
            with contextlib.suppress(ClusterError, KeyError):
                self.cluster.iptables(node_id, "-D", *rule)

    # -- observation -----------------------------------------------------------------------

    def status(self, node_id: str) -> NodeView | None:
        if node_id in self._paused or node_id in self._killed:
            return None
        status = self.cluster.status(node_id, timeout_s=_STATUS_TIMEOUT_S)
        # A pinned call can still be answered by another member when this one is down.
        return status_view(status) if status is not None and status.node_id == node_id else None

    def read_replica(self, node_id: str, topic: str) -> ReplicaSnapshot:
        try:
            queues = read_queues(self.host_address(node_id), topic)
            code, output = self.cluster.nodes[node_id].container.exec(
                ["python3", "-c", _DIGEST_SCRIPT]
            )
        except (grpc.RpcError, OSError):
            return ReplicaSnapshot(node_id=node_id)  # unreadable: left out of comparisons
        if code != 0:
            return ReplicaSnapshot(node_id=node_id)
        digest, size_bytes = bytes(output).decode().split()
        return ReplicaSnapshot(
            node_id=node_id,
            queues=queues,
            commitlog_digest=digest,
            commitlog_bytes=int(size_bytes),
        )
