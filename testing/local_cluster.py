"""A local cluster of REAL node processes on 127.0.0.1, for the CLI (`raftlog cluster up`) and
integration tests.

Each node runs ``python -m raftlog.cli node start ...`` with its own data directory
``<base_dir>/<node_id>`` and its output in ``<base_dir>/<node_id>/node.log``.
``<base_dir>/cluster.json`` records the ports and PIDs, so ``LocalCluster.load(base_dir)``
can stop or inspect the cluster from another process.

Rules this module keeps:
- Servers listen on 127.0.0.1 only.
- Only processes this module started are signalled, by PID, and only while
  /proc/<pid>/cmdline still looks like our node (contains "raftlog" and the node id), so a
  recycled PID is never killed. Stop is SIGTERM, a bounded wait, then SIGKILL; ``stop`` says
  which nodes it had to kill.
- A node runs when its process holds its store's lock (testing/running_nodes.py), whatever
  cluster.json says: ``load`` adopts such a process, and ``start`` refuses, changing nothing,
  while any node of the directory runs.
- Every wait is bounded in time and in the number of checks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from raftlog.client.tls import ClientTls
from raftlog.testing.cluster_state import CLUSTER_FILE, LocalNode, read_state, write_state
from raftlog.testing.dev_ca import init_ca, issue
from raftlog.testing.group_roles import master_slave_settings
from raftlog.testing.local_controllers import LocalController, LocalControllers
from raftlog.testing.node_probes import (
    HOST,
    alive,
    cmdline,
    free_port,
    health,
    leader_address,
    port_in_use,
)
from raftlog.testing.running_nodes import node_pid

LOG_FILE = "node.log"
DEFAULT_BASE_PORT = 7701
# With a fixed base port, a node's peer port is its client port plus this: the ports a node
# derives when told none (node/config.py), so `cluster up` and hand-started nodes agree.
PEER_PORT_OFFSET = 1000
# The client certificate a TLS cluster issues for its own tools and tests.
CLIENT_NAME = "admin"
_CLIENT_TLS_FILES = ("ca.pem", f"{CLIENT_NAME}.pem", f"{CLIENT_NAME}.key")
_POLL_INTERVAL_S = 0.1


def free_ports(count: int, taken: set[int] | None = None, *, with_peer: bool = True) -> list[int]:
    """``count`` free ports none of which is in ``taken`` or repeats (the kernel may hand out
    a port it just gave, once the probe closed it); ``with_peer``: each one's peer port (+
    PEER_PORT_OFFSET, the port a node derives by default) free and distinct too. Adds what it
    returns to ``taken``."""
    taken = set() if taken is None else taken
    ports: list[int] = []
    for _ in range(100 * count):
        port = free_port()
        wanted = {port, port + PEER_PORT_OFFSET} if with_peer else {port}
        if max(wanted) > 65535 or wanted & taken:
            continue
        if with_peer and port_in_use(port + PEER_PORT_OFFSET):
            continue
        ports.append(port)
        taken |= wanted
        if len(ports) == count:
            return ports
    raise ClusterError(f"no {count} distinct free ports found")


class ClusterError(RuntimeError):
    """The local cluster could not be started, found or stopped (the message says why)."""


class LocalCluster:
    """Start, stop, kill and restart a local cluster of ``node_count`` node processes.

    ``base_port`` 0 picks free ports; otherwise n1 listens on ``base_port`` and nK on
    ``base_port + K - 1``.
    ``durability`` is passed to every node ("fsync" or "write"); ``replication`` "master-slave"
    makes n1 the master (``master_role`` SYNC_MASTER or ASYNC_MASTER, broker_id 0) and the
    other nodes its slaves (static mode); ``extra_args`` are appended
    to every node's command line (e.g. ``("--tick-ms", "20")``). Each node also serves a peer
    port, its client port + ``PEER_PORT_OFFSET`` (the port every node derives by default, so
    a node started by hand with ``--join`` reaches them; ``base_port`` 0 picks client ports
    whose peer port is free too).
    ``peer_overrides`` (node id -> that node's own peers map) replaces ``peers_flag`` for the
    nodes it names, and ``peer_port_overrides`` (node id -> its ``--peer-addresses`` map)
    the peer addresses it dials: the chaos target routes each node's traffic to the others
    through link proxies this way (each node's own entry must stay its real address). Both
    may also be set after construction, once the ports are known; they are not recorded in
    cluster.json. ``controller_overrides`` (node id ->
    ``--controller-addresses`` value) does the same for the controller members' addresses.
    ``metrics`` gives every node a Prometheus endpoint on a free port (``metrics_url``).
    ``auth_token`` makes the nodes require that bearer token on the client port (a 0600 file
    ``<base_dir>/auth-tokens``, node setting auth_tokens_file; ``client_token``).
    ``tls`` makes a development CA in ``<base_dir>/tls`` (testing/dev_ca.py), a certificate
    per node and one for the client "admin" (``client_tls``), and starts the nodes with TLS on
    both ports and client certificates required on the client port too.
    """

    def __init__(
        self,
        base_dir: str = "./data",
        node_count: int = 3,
        base_port: int = DEFAULT_BASE_PORT,
        *,
        durability: str = "fsync",
        replication: str = "raft",
        master_role: str = "SYNC_MASTER",
        controllers: LocalControllers | None = None,
        extra_args: Sequence[str] = (),
        peer_overrides: Mapping[str, Mapping[str, str]] | None = None,
        metrics: bool = False,
        tls: bool = False,
        auth_token: str | None = None,
    ) -> None:
        if node_count < 1:
            raise ValueError(f"node_count is {node_count}; it must be at least 1")
        self.base_dir = os.path.abspath(base_dir)
        self.durability = durability
        self.replication = replication
        self.master_role = master_role
        # Master-slave under a controller: its three members, started before the nodes.
        self.controllers = controllers
        self.extra_args = tuple(extra_args)
        taken_ports: set[int] = set()
        ports = (
            free_ports(node_count, taken_ports, with_peer=True)
            if base_port == 0
            else [base_port + i for i in range(node_count)]
        )
        self.nodes: dict[str, LocalNode] = {
            f"n{i + 1}": LocalNode(
                node_id=f"n{i + 1}",
                port=port,
                data_dir=os.path.join(self.base_dir, f"n{i + 1}"),
                peer_port=port + PEER_PORT_OFFSET,
            )
            for i, port in enumerate(ports)
        }
        self.peer_overrides: dict[str, dict[str, str]] = {
            node_id: dict(peers) for node_id, peers in (peer_overrides or {}).items()
        }
        self.peer_port_overrides: dict[str, dict[str, str]] = {}
        self.controller_overrides: dict[str, str] = {}
        self.metrics_ports: dict[str, int] = (
            dict(
                zip(
                    self.nodes,
                    free_ports(len(self.nodes), taken_ports, with_peer=False),
                    strict=True,
                )
            )
            if metrics
            else {}
        )
        self.tls = tls
        if tls:
            self._issue_certificates()
        # Token authentication: the nodes accept this one client token (its probes use it).
        self.client_token = auth_token
        if auth_token is not None:
            os.makedirs(self.base_dir, exist_ok=True)
            descriptor = os.open(self._tokens_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(f"{CLIENT_NAME}:{auth_token}\n")
        # Processes this object spawned (reaped on stop); a loaded cluster has none.
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def tls_dir(self) -> str:
        return os.path.join(self.base_dir, "tls")

    def _issue_certificates(self) -> None:
        init_ca(self.tls_dir)
        for node_id in self.nodes:
            issue(self.tls_dir, node_id)
        issue(self.tls_dir, CLIENT_NAME)

    @property
    def client_tls(self) -> ClientTls | None:
        """How a client dials this cluster: None without TLS."""
        if not self.tls:
            return None
        return ClientTls(*(os.path.join(self.tls_dir, f) for f in _CLIENT_TLS_FILES))

    @property
    def _tokens_file(self) -> str:
        return os.path.join(self.base_dir, "auth-tokens")

    def _tls_args(self, node_id: str) -> list[str]:
        tokens = [] if self.client_token is None else ["--auth-tokens-file", self._tokens_file]
        if not self.tls:
            return tokens
        files = [
            os.path.join(self.tls_dir, f) for f in ("ca.pem", f"{node_id}.pem", f"{node_id}.key")
        ]
        return [
            "--tls-ca-file",
            files[0],
            "--tls-cert-file",
            files[1],
            "--tls-key-file",
            files[2],
            "--tls-client-auth-enable",
            "true",
            *tokens,
        ]

    # -- state file ------------------------------------------------------------------------

    @property
    def addresses(self) -> list[str]:
        """Every node's client address, in node id order."""
        return [node.address for node in self.nodes.values()]

    @property
    def peers_flag(self) -> str:
        """``n1=127.0.0.1:p1,n2=...``, the ``--peers`` value every node gets."""
        return ",".join(f"{n.node_id}={n.address}" for n in self.nodes.values())

    def peers_flag_for(self, node_id: str) -> str:
        """The ``--peers`` value ``node_id`` gets: its override, else ``peers_flag``."""
        peers = self.peer_overrides.get(node_id)
        if peers is None:
            return self.peers_flag
        return ",".join(f"{peer_id}={address}" for peer_id, address in peers.items())

    def _peer_port_args(self, node_id: str) -> list[str]:
        """``--peer-addresses`` when ``peer_port_overrides`` names this node."""
        peer_addresses = self.peer_port_overrides.get(node_id)
        if not peer_addresses:
            return []
        listed = ",".join(f"{k}={v}" for k, v in peer_addresses.items())
        return ["--peer-addresses", listed]

    def _save(self) -> None:
        settings = {
            "durability": self.durability,
            "replication": self.replication,
            "master_role": self.master_role,
            "extra_args": list(self.extra_args),
            "metrics_ports": self.metrics_ports,
            "tls": self.tls,
            "controllers": [c.to_json() for c in self.controllers.members]
            if self.controllers is not None
            else None,
        }
        write_state(self.base_dir, settings, list(self.nodes.values()))

    @classmethod
    def load(cls, base_dir: str = "./data") -> LocalCluster:
        """The cluster described by ``<base_dir>/cluster.json`` (written by ``start``)."""
        try:
            settings, nodes = read_state(base_dir)
            cluster = cls(
                base_dir,
                node_count=len(nodes),
                base_port=nodes[0].port,
                durability=str(settings.get("durability", "fsync")),
                replication=str(settings.get("replication", "raft")),
                master_role=str(settings.get("master_role", "SYNC_MASTER")),
                extra_args=[str(a) for a in settings.get("extra_args", [])],
                controllers=LocalControllers(
                    base_dir, [LocalController.from_json(c) for c in settings["controllers"]]
                )
                if settings.get("controllers")
                else None,
            )
        except FileNotFoundError:
            path = os.path.join(base_dir, CLUSTER_FILE)
            raise ClusterError(f"no local cluster in {base_dir} ({path} does not exist)") from None
        except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
            raise ClusterError(
                f"{base_dir}/{CLUSTER_FILE} is unreadable or malformed: {error}"
            ) from None
        cluster.nodes = {node.node_id: node for node in nodes}
        cluster.tls = bool(settings.get("tls", False))
        cluster.adopt_running()
        cluster.metrics_ports = {
            str(node_id): int(port) for node_id, port in settings.get("metrics_ports", {}).items()
        }
        return cluster

    # -- processes -------------------------------------------------------------------------

    def command(self, node_id: str) -> list[str]:
        """The command line that starts ``node_id``."""
        node = self.nodes[node_id]
        return [
            sys.executable,
            "-m",
            "raftlog.cli",
            "node",
            "start",
            "--node-id",
            node.node_id,
            "--listen",
            node.address,
            "--peers",
            self.peers_flag_for(node_id),
            *self._peer_port_args(node_id),
            "--data-dir",
            node.data_dir,
            "--durability",
            self.durability,
            *self._mode_args(node_id),
            *self._metrics_args(node_id),
            *self._tls_args(node_id),
            *self.extra_args,
        ]

    def _metrics_args(self, node_id: str) -> list[str]:
        port = self.metrics_ports.get(node_id)
        return [] if port is None else ["--metrics-listen", f"{HOST}:{port}"]

    def metrics_url(self, node_id: str) -> str | None:
        """``node_id``'s Prometheus endpoint, or None when the cluster has none."""
        port = self.metrics_ports.get(node_id)
        return None if port is None else f"http://{HOST}:{port}/metrics"

    def _mode_args(self, node_id: str) -> list[str]:
        """Master-slave flags: n1 is the master (broker_id 0), nK slave K-1 of it."""
        if self.replication != "master-slave":
            return []
        first = next(iter(self.nodes.values()))
        # The master as this node reaches it: through a link proxy when the chaos target
        # routes its peer traffic through one.
        master = self.peer_overrides.get(node_id, {}).get(first.node_id, first.address)
        settings = master_slave_settings(
            list(self.nodes),
            node_id,
            self.master_role,
            master,
            None
            if self.controllers is None
            else self.controller_overrides.get(node_id, self.controllers.addresses),
        )
        return [
            arg
            for name, value in settings.items()
            for arg in (f"--{name.replace('_', '-')}", value)
        ]

    def _ours(self, node: LocalNode) -> bool:
        """The recorded PID still runs our node (not a recycled PID)."""
        if node.pid is None or not alive(node.pid):
            return False
        command = cmdline(node.pid)
        return "raftlog" in command and f"--node-id {node.node_id}" in command

    def adopt_running(self) -> list[str]:
        """Record, for each node whose recorded pid is not running it, the node process that
        holds its store's lock (if any); returns the ids of the nodes running now."""
        for node in self.nodes.values():
            if not self._ours(node):
                node.pid = node_pid(node.data_dir, node.node_id)
        return [node_id for node_id, node in self.nodes.items() if self._ours(node)]

    def running(self, node_id: str) -> bool:
        """True while ``node_id``'s recorded process runs."""
        return self._ours(self.nodes[node_id])

    def _spawn(self, node_id: str) -> None:
        node = self.nodes[node_id]
        if self._ours(node):
            raise ClusterError(f"{node_id} is already running (pid {node.pid})")
        for address in (node.address, node.peer_address):
            port = int(address.rsplit(":", 1)[1])
            if port_in_use(port):
                raise ClusterError(
                    f"port {port} for {node_id} is already in use; stop what uses it or "
                    "choose another base port"
                )
        os.makedirs(node.data_dir, exist_ok=True)
        log_path = os.path.join(node.data_dir, LOG_FILE)
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                self.command(node_id),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own session: Ctrl-C in the shell that ran `cluster up` does not reach it.
                start_new_session=True,
            )
        self._processes[node_id] = process
        node.pid = process.pid
        self._save()

    def start(
        self,
        wait_timeout_s: float = 30.0,
        *,
        progress: Callable[[], None] | None = None,
    ) -> None:
        """Spawn every node, write cluster.json, then wait until each answers health SERVING
        and a leader is known. ``progress`` is called about every half second while waiting.
        On timeout or a node that exits, stops what was started and raises ClusterError; while
        a node of this directory runs, raises ClusterError at once, having changed nothing."""
        running = self.adopt_running()
        if running:
            pids = ", ".join(f"{n} pid {self.nodes[n].pid}" for n in running)
            raise ClusterError(
                f"a cluster is already running in {self.base_dir} ({pids}); nothing was changed"
            )
        if self.controllers is not None:
            self.controllers.start()
        for node_id in self.nodes:
            try:
                self._spawn(node_id)
            except BaseException:
                self.stop(timeout_s=5)
                raise
        try:
            self.wait_ready(wait_timeout_s, progress=progress)
        except BaseException:
            self.stop(timeout_s=5)
            raise

    def _exited(self) -> str | None:
        """The first node whose process has exited, with its log's tail."""
        for node_id, node in self.nodes.items():
            process = self._processes.get(node_id)
            if process is not None and process.poll() is not None:
                return (
                    f"{node_id} exited with status {process.returncode}: {self.log_tail(node_id)}"
                )
            if process is None and node.pid is not None and not self._ours(node):
                return f"{node_id} (pid {node.pid}) is not running: {self.log_tail(node_id)}"
        return None

    def log_tail(self, node_id: str, lines: int = 5) -> str:
        """The last ``lines`` lines of ``node_id``'s log, on one line."""
        path = os.path.join(self.nodes[node_id].data_dir, LOG_FILE)
        try:
            with open(path, errors="replace") as handle:
                tail = handle.read()[-4000:].strip().splitlines()[-lines:]
        except OSError:
            return "(no log)"
        return " | ".join(tail) or "(empty log)"

    def wait_ready(
        self,
        timeout_s: float,
        *,
        node_ids: Sequence[str] | None = None,
        progress: Callable[[], None] | None = None,
    ) -> str:
        """Wait until the nodes (default all) answer health SERVING and one of them knows a
        leader; returns the leader's address. Raises ClusterError on timeout or exit."""
        wanted = list(node_ids) if node_ids is not None else list(self.nodes)
        deadline = time.monotonic() + timeout_s
        last_progress = time.monotonic()
        pending = set(wanted)
        problem = "not started"
        max_checks = int(timeout_s / _POLL_INTERVAL_S) + 2
        for _ in range(max_checks):
            exited = self._exited()
            if exited is not None and any(exited.startswith(n) for n in wanted):
                raise ClusterError(exited)
            for node_id in sorted(pending):
                if self.health(node_id, timeout_s=0.5) == "SERVING":
                    pending.discard(node_id)
            if not pending:
                leader = self.leader_address(timeout_s=1.0, node_ids=wanted)
                if leader is not None:
                    return leader
                problem = "no leader elected"
            else:
                problem = f"not serving: {', '.join(sorted(pending))}"
            now = time.monotonic()
            if now >= deadline:
                break
            if progress is not None and now - last_progress >= 0.5:
                progress()
                last_progress = now
            time.sleep(min(_POLL_INTERVAL_S, max(0.0, deadline - now)))
        raise ClusterError(f"cluster not ready after {timeout_s:.0f} s ({problem})")

    def health(self, node_id: str, timeout_s: float = 1.0) -> str:
        """The node's gRPC health status name ("SERVING", ...) or "UNREACHABLE"."""
        return health(self.nodes[node_id].address, timeout_s, self.client_tls)

    def leader_address(
        self, timeout_s: float = 1.0, node_ids: Sequence[str] | None = None
    ) -> str | None:
        """The leader's address as the first answering node reports it, or None."""
        wanted = node_ids if node_ids is not None else list(self.nodes)
        addresses = [self.nodes[n].address for n in wanted]
        return leader_address(addresses, timeout_s, self.client_tls, self.client_token)

    def _signal(self, node: LocalNode, signum: int) -> bool:
        if not self._ours(node):
            return False
        assert node.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(node.pid, signum)
        return True

    def _wait_gone(self, node: LocalNode, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        for _ in range(int(timeout_s / 0.05) + 2):
            process = self._processes.get(node.node_id)
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=0.05)
                if process.poll() is not None:
                    return True
            elif not self._ours(node):
                return True
            else:
                time.sleep(0.05)
            if time.monotonic() >= deadline:
                break
        return not self._ours(node)

    def stop_node(self, node_id: str, timeout_s: float = 10.0) -> None:
        """SIGTERM ``node_id``, wait up to ``timeout_s``, then SIGKILL."""
        node = self.nodes[node_id]
        if self._signal(node, signal.SIGTERM) and not self._wait_gone(node, timeout_s):
            self._signal(node, signal.SIGKILL)
            self._wait_gone(node, 5.0)
        self._processes.pop(node_id, None)
        node.pid = None

    def stop(self, timeout_s: float = 10.0) -> list[str]:
        """Stop every node: SIGTERM all, wait up to ``timeout_s`` in total, SIGKILL the rest.
        Records the stopped state in cluster.json; returns the ids of the nodes killed."""
        nodes = list(self.nodes.values())
        for node in nodes:
            self._signal(node, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        killed = []
        for node in nodes:
            if not self._wait_gone(node, max(0.0, deadline - time.monotonic())):
                if self._signal(node, signal.SIGKILL):
                    killed.append(node.node_id)
                self._wait_gone(node, 5.0)
            self._processes.pop(node.node_id, None)
            node.pid = None
        if self.controllers is not None:
            self.controllers.stop(timeout_s)
        if os.path.isdir(self.base_dir):
            self._save()
        return killed

    def kill(self, node_id: str) -> None:
        """SIGKILL ``node_id`` (a crash: no graceful shutdown)."""
        node = self.nodes[node_id]
        if self._signal(node, signal.SIGKILL):
            self._wait_gone(node, 5.0)
        self._processes.pop(node_id, None)
        node.pid = None
        self._save()

    def start_node(self, node_id: str) -> None:
        """Start ``node_id``'s process (it must not run) and return at once, without waiting
        for it to serve (a bench times that itself)."""
        self._spawn(node_id)

    def restart(self, node_id: str, wait_timeout_s: float = 30.0) -> None:
        """Stop ``node_id`` if it runs, start it again and wait until it serves and knows a
        leader."""
        self.stop_node(node_id)
        self._spawn(node_id)
        self.wait_ready(wait_timeout_s, node_ids=[node_id])

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
