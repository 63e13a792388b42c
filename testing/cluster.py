"""RaftlogCluster: a 3-node raftlog cluster in Docker containers, driven from the host.

How the host reaches it (docs/deploy.md, "Tests against a container cluster"): every node
listens on 0.0.0.0:7701 in its container and advertises ``nX:7701``, its alias on the
cluster's private network, exactly as compose.yaml does; the nodes reach each other by those
names. Each node's port is published on the host's loopback at a port chosen once, when the
cluster starts, and bound explicitly, so it stays the same across kill/start, restart and
network disconnect/reconnect. Host clients get a ``Connection`` whose ``address_map`` dials
``nX:7701`` at ``127.0.0.1:<its port>``: redirects to the leader name ``nX:7701`` and are
dialled through the map.

Clean-up without Ryuk (it needs a registry pull): every container, the network and every
volume carry the run's labels (docker_objects.py). ``close`` (and ``__exit__``) removes
everything with the run's label; ``start`` first removes what runs of dead processes on this
host left (``sweep_stale``), never a live run's. Names start ``raftlog-test-<run id[:8]>``
(the network; ``-nX`` its nodes and their volumes), so they are recognisable in Docker.
"""

from __future__ import annotations

import os

# Before testcontainers reads its configuration: its reaper image cannot be pulled offline
# (docker_objects.py also turns it off in testcontainers' own settings).
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import contextlib
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any

from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network
from testcontainers.core.wait_strategies import HealthcheckWaitStrategy

from raftlog.client import (
    Admin,
    ClusterStatus,
    Connection,
    Consumer,
    Producer,
    RaftlogError,
)
from raftlog.testing.container_controllers import ContainerControllers
from raftlog.testing.docker_objects import (  # first: it configures testcontainers
    LABEL_OWNER,
    LABEL_RUN,
    docker_client,
    image_present,
    missing_image_message,
    owner,
    remove_by_label,
    sweep_stale,
)
from raftlog.testing.group_roles import master_slave_settings

DEFAULT_IMAGE = "raftlog:dev"
NODE_PORT = 7701
DATA_DIR = "/data"
# The image's raftlog user (deploy/Dockerfile): it must own a tmpfs data directory.
NODE_UID = 10001


class ClusterError(RuntimeError):
    """The cluster did not reach the state asked for in time (the message says which)."""


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class RaftlogNode:
    """One node's container, volume (None: its data directory is a tmpfs) and host port."""

    def __init__(
        self, node_id: str, container: DockerContainer, volume: str | None, host_port: int
    ):
        self.node_id = node_id
        self.container = container
        self.volume = volume
        self.host_port = host_port

    @property
    def address(self) -> str:
        """The address the node advertises (and the cluster knows it by): ``nX:7701``."""
        return f"{self.node_id}:{NODE_PORT}"

    @property
    def docker(self) -> Any:
        """The docker SDK container (reloaded)."""
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        return wrapped


class RaftlogCluster:
    """A raftlog cluster in containers. Use it as a context manager::

        with RaftlogCluster() as cluster:
            with cluster.producer() as producer:
                producer.send("events", b"hello")

    ``image``: the node image (``raftlog:dev``, made by ``make image``; never pulled when
    present). ``nodes``: how many (3). ``env``: extra ``RAFTLOG_*`` settings for every node
    (e.g. ``{"RAFTLOG_DURABILITY": "write"}``). ``bind_host``: where the ports are published.
    ``replication="master-slave"`` makes n1 the master (``master_role``) and the other nodes
    its slaves (static mode); with ``controlled`` too, three controller members run in
    containers beside the brokers (container_controllers.py) and elect the master, as
    ``raftlog cluster up --replication master-slave`` does. ``data_tmpfs_mib``: each node's
    data directory is a tmpfs of that many MiB instead of a volume (a small disk that fills
    up; its data does not survive a container stop).
    """

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        nodes: int = 3,
        env: Mapping[str, str] | None = None,
        bind_host: str = "127.0.0.1",
        start_timeout_s: float = 120.0,
        replication: str = "raft",
        master_role: str = "SYNC_MASTER",
        controlled: bool = False,
        data_tmpfs_mib: int | None = None,
    ) -> None:
        if controlled and replication != "master-slave":
            raise ValueError("controlled: only a master-slave group has a controller")
        self.image = image
        self.replication = replication
        self.master_role = master_role
        self.controlled = controlled
        self.controllers: ContainerControllers | None = None
        self.run_id = str(uuid.uuid4())
        self.bind_host = bind_host
        self.start_timeout_s = start_timeout_s
        self._node_ids = [f"n{i}" for i in range(1, nodes + 1)]
        self._env = dict(env or {})
        self._data_tmpfs_mib = data_tmpfs_mib
        self._network: Network | None = None
        self.nodes: dict[str, RaftlogNode] = {}
        self._disconnected: set[str] = set()

    # -- life cycle ---------------------------------------------------------------------

    @property
    def labels(self) -> dict[str, str]:
        """The labels on everything this cluster creates."""
        return {LABEL_RUN: self.run_id, LABEL_OWNER: owner()}

    def start(self) -> RaftlogCluster:
        """Create the network, volumes and containers, and wait for every node to be healthy
        and a leader to be elected. On failure, removes what it made and raises (a missing
        image: one line saying to build it, before anything is made)."""
        if not image_present(self.image):
            raise ClusterError(missing_image_message(self.image))
        sweep_stale()
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        client = docker_client()
        short = self.run_id[:8]
        self._network = Network(docker_network_kw={"labels": self.labels, "driver": "bridge"})
        self._network.name = f"raftlog-test-{short}"  # not a bare UUID: `docker network ls`
        self._network.create()
        peers = ",".join(f"{n}={n}:{NODE_PORT}" for n in self._node_ids)
        if self.controlled:
            self.controllers = ContainerControllers(
                self.image, self._network, self.labels, f"raftlog-test-{short}"
            )
            self.controllers.start(client, self.start_timeout_s)
        for node_id in self._node_ids:
            volume, tmpfs = self._data_dir_of(client, f"raftlog-test-{short}-{node_id}")
            host_port = _free_port(self.bind_host)
            container = (
                DockerContainer(self.image)
                .with_name(f"raftlog-test-{short}-{node_id}")
                .with_network(self._network)
                .with_network_aliases(node_id)
                .with_envs(
                    RAFTLOG_NODE_ID=node_id,
                    RAFTLOG_ADVERTISE_ADDRESS=f"{node_id}:{NODE_PORT}",
                    RAFTLOG_PEERS=peers,
                    RAFTLOG_CLUSTER_ID=f"test-{short}",
                    **self._mode_env(node_id),
                    **self._env,
                )
                .with_kwargs(labels=self.labels, hostname=node_id)
            )
            if volume is not None:
                container.with_volume_mapping(volume, DATA_DIR, "rw")
            if tmpfs is not None:
                container.with_tmpfs_mount(DATA_DIR, tmpfs)  # the whole option string
            # testcontainers' with_bind_ports takes no host IP: the SDK's (ip, port) form.
            ports: dict[str, Any] = container.ports
            ports[f"{NODE_PORT}/tcp"] = (self.bind_host, host_port)
            self.nodes[node_id] = RaftlogNode(node_id, container, volume, host_port)
            container.start()
        for node in self.nodes.values():
            HealthcheckWaitStrategy().with_startup_timeout(
                int(self.start_timeout_s)
            ).wait_until_ready(node.container)
        self.wait_for_leader(timeout_s=self.start_timeout_s)

    def _data_dir_of(self, client: Any, volume: str) -> tuple[str | None, str | None]:
        """A node's data directory: (a new labelled volume named ``volume``, None), or with
        ``data_tmpfs_mib`` (None, the options of a tmpfs the node's user owns)."""
        if self._data_tmpfs_mib is None:
            client.volumes.create(name=volume, labels=self.labels)
            return volume, None
        return None, f"size={self._data_tmpfs_mib}m,uid={NODE_UID},gid={NODE_UID},mode=0700"

    def _mode_env(self, node_id: str) -> dict[str, str]:
        if self.replication != "master-slave":
            return {}
        master = f"{self._node_ids[0]}:{NODE_PORT}"
        settings = master_slave_settings(
            self._node_ids,
            node_id,
            self.master_role,
            master,
            None if self.controllers is None else self.controllers.addresses,
        )
        return {f"RAFTLOG_{name.upper()}": value for name, value in settings.items()}

    def close(self) -> None:
        """Remove every container, the network and every volume of this run."""
        remove_by_label(self.run_id)
        self.nodes.clear()
        self.controllers = None
        self._network = None

    def __enter__(self) -> RaftlogCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- clients --------------------------------------------------------------------------

    @property
    def node_ids(self) -> list[str]:
        return list(self._node_ids)

    @property
    def addresses(self) -> list[str]:
        """The members' advertised addresses (``n1:7701``, ...)."""
        return [f"{n}:{NODE_PORT}" for n in self._node_ids]

    @property
    def address_map(self) -> dict[str, str]:
        """Advertised address -> the host address that reaches it."""
        return {node.address: f"{self.bind_host}:{node.host_port}" for node in self.nodes.values()}

    def connection(self) -> Connection:
        """A client connection that works from the host (close it, or use ``with``)."""
        return Connection(self.addresses, address_map=self.address_map)

    def producer(self, **kwargs: Any) -> Producer:
        return Producer(self.connection(), **kwargs)

    def consumer(self, group: str, topic: str, **kwargs: Any) -> Consumer:
        return Consumer(self.connection(), group, topic, **kwargs)

    def admin(self, **kwargs: Any) -> Admin:
        return Admin(self.connection(), **kwargs)

    # -- state ------------------------------------------------------------------------------

    def status(self, node_id: str, timeout_s: float = 2.0) -> ClusterStatus | None:
        """``node_id``'s own view, or None when it does not answer."""
        try:
            with Connection([f"{node_id}:{NODE_PORT}"], address_map=self.address_map) as conn:
                return Admin(conn, timeout_s=timeout_s).cluster_status(
                    address=f"{node_id}:{NODE_PORT}"
                )
        except RaftlogError:
            return None

    def wait_for_leader(
        self, *, exclude: str | None = None, timeout_s: float = 30.0
    ) -> tuple[str, int]:
        """(node id, term) of a leader, in the highest term any node claims; polls every node
        (but ``exclude``: one just killed or paused, whose stale claim must not count) every
        0.2 s. Use it after a fault and before the next write or assertion that needs one.
        Raises ClusterError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            views = [self.status(n, timeout_s=1.0) for n in self._node_ids if n != exclude]
            leaders = [v for v in views if v is not None and v.role == "leader"]
            if leaders:
                best = max(leaders, key=lambda v: v.term)
                return best.node_id, best.term
            time.sleep(0.2)
        raise ClusterError(f"no leader (excluding {exclude}) within {timeout_s:.0f} s")

    def wait_converged(self, timeout_s: float = 60.0) -> int:
        """Wait until every node answers and its applied, commit and last index are one
        and the same on all of them; returns that index. Use it after healing every fault
        (a node still killed, paused or cut off never converges) and before comparing
        replicas (``commitlog_checksums``). Raises ClusterError, with the last statuses,
        after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        last: list[ClusterStatus | None] = []
        while time.monotonic() < deadline:
            last = [self.status(n) for n in self._node_ids]
            if all(v is not None for v in last):
                applied = {v.applied_index for v in last if v is not None}
                final = {v.last_index for v in last if v is not None}
                commits = {v.commit_index for v in last if v is not None}
                if len(applied) == 1 and applied == final == commits:
                    return applied.pop()
            time.sleep(0.25)
        raise ClusterError(f"replicas did not converge within {timeout_s:.0f} s: {last}")

    def commitlog_checksums(self, node_id: str) -> str:
        """``sha256sum`` of the node's CommitLog segment files, sorted by name, run inside
        its (running) container: after ``wait_converged``, equal strings on every node mean
        byte-identical replicas. Raises ClusterError when it cannot run."""
        code, output = self.nodes[node_id].container.exec(
            ["sh", "-c", f"cd {DATA_DIR}/store/commitlog && sha256sum * | sort -k2"]
        )
        if code != 0:
            raise ClusterError(f"sha256sum in {node_id} failed ({code}): {output!r}")
        return bytes(output).decode()

    def _docker_of(self, member_id: str) -> Any:
        """The docker SDK container (reloaded) of a node, or of a controller member (c1...)."""
        if member_id in self.nodes:
            return self.nodes[member_id].docker
        if self.controllers is None or member_id not in self.controllers.containers:
            raise KeyError(f"no node or controller member {member_id!r}")
        wrapped = self.controllers.containers[member_id].get_wrapped_container()
        wrapped.reload()
        return wrapped

    def container_ip(self, node_id: str) -> str:
        """The node's (or controller member's) address on the cluster's network."""
        assert self._network is not None
        networks = self._docker_of(node_id).attrs["NetworkSettings"]["Networks"]
        return str(networks[self._network.name]["IPAddress"])

    def pid(self, node_id: str) -> int:
        """The main process id on the host of a node's (or controller member's) container
        (changes on every start)."""
        return int(self._docker_of(node_id).attrs["State"]["Pid"])

    def logs(self, node_id: str, tail: int = 30) -> str:
        return bytes(self.nodes[node_id].docker.logs(tail=tail)).decode(errors="replace")

    # -- faults -----------------------------------------------------------------------------

    def kill(self, node_id: str) -> None:
        """SIGKILL the node's container (it stays, with its volume)."""
        self.nodes[node_id].docker.kill(signal="SIGKILL")

    def start_node(self, node_id: str, timeout_s: float = 60.0) -> None:
        """Start a stopped container again (same volume, same host port); wait until healthy."""
        self.nodes[node_id].docker.start()
        self.wait_answers(node_id, timeout_s)

    def restart(self, node_id: str, timeout_s: float = 60.0) -> None:
        """``docker restart`` (SIGTERM, then start) with the same volume; wait until it answers."""
        self.nodes[node_id].docker.restart(timeout=15)
        self.wait_answers(node_id, timeout_s)

    def wait_answers(self, node_id: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.status(node_id, timeout_s=1.0) is not None:
                return
            time.sleep(0.2)
        raise ClusterError(f"{node_id} did not answer within {timeout_s:.0f} s")

    def pause(self, node_id: str) -> None:
        """Freeze every process of the node (a silent stall: connections hang)."""
        self.nodes[node_id].docker.pause()

    def unpause(self, node_id: str) -> None:
        self.nodes[node_id].docker.unpause()

    def disconnect(self, node_id: str) -> None:
        """Take the node off the cluster's network (peers fail fast: its name stops resolving)."""
        assert self._network is not None
        docker_client().networks.get(self._network.name).disconnect(self.nodes[node_id].docker.id)
        self._disconnected.add(node_id)

    def reconnect(self, node_id: str) -> None:
        """Put it back on the network, with its alias (its IP address may change)."""
        assert self._network is not None
        docker_client().networks.get(self._network.name).connect(
            self.nodes[node_id].docker.id, aliases=[node_id]
        )
        self._disconnected.discard(node_id)

    def iptables(self, node_id: str, *rule: str) -> None:
        """Run ``iptables RULE...`` in the network namespace of a node (or controller member),
        from the host (the container itself has no NET_ADMIN): needs root, ``nsenter`` and
        ``iptables`` on the host. Rules go with the namespace when the container stops."""
        command = ["nsenter", "-t", str(self.pid(node_id)), "-n", "iptables", *rule]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ClusterError(f"{' '.join(command)} failed: {done.stderr.strip()}")

    def drop_from(self, node_id: str, peer_id: str) -> list[str]:
        """Silently drop, in ``node_id``, every packet that comes from ``peer_id`` (INPUT
        DROP: ``node_id``'s own connects to the peer hang too, their replies are dropped).
        Returns the rule, for ``undrop``."""
        rule = ["INPUT", "-s", self.container_ip(peer_id), "-j", "DROP"]
        self.iptables(node_id, "-A", *rule)
        return rule

    def undrop(self, node_id: str, rule: list[str]) -> None:
        self.iptables(node_id, "-D", *rule)


@contextlib.contextmanager
def running_cluster(**kwargs: Any) -> Iterator[RaftlogCluster]:
    """``with running_cluster(...) as cluster``: the same as ``with RaftlogCluster(...)``."""
    with RaftlogCluster(**kwargs) as cluster:
        yield cluster
