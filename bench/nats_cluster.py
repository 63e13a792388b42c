"""A local 3-server NATS JetStream cluster for the side-by-side bench: one config file, one
JetStream store directory and one log per server under ``base_dir``, all on 127.0.0.1.

Rules this module keeps:
- Ports are free ports picked at construction (client and route port per server); every
  server routes to the other two, so the cluster forms whichever starts first.
- ``sync_always`` writes ``jetstream { sync_interval: always }`` (fsync every write on every
  server; 2.10 and later): the peer for raftlog's fsync-before-ack. Without it, the server's
  default (acknowledged from memory, fsynced in the background) is the peer for "write".
- Only processes this object started are signalled, by the PID it recorded; ``stop`` always
  ends them (SIGTERM, then SIGKILL after a bounded wait). Every wait is bounded in time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time

from raftlog.bench.nats_install import NatsBinary
from raftlog.testing.node_probes import free_port

SERVER_NAMES = ("n1", "n2", "n3")
CLUSTER_NAME = "raftlog-bench"
PORT_WAIT_S = 20.0
STOP_WAIT_S = 10.0


class NatsClusterError(RuntimeError):
    """A server did not start, or exited."""


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class NatsCluster:
    def __init__(self, binary: NatsBinary, base_dir: str, *, sync_always: bool) -> None:
        if sync_always and not binary.has_sync_interval:
            raise NatsClusterError(
                f"nats-server {binary.version} has no sync_interval: always (needs 2.10+)"
            )
        self.binary = binary
        self.base_dir = os.path.abspath(base_dir)
        self.sync_always = sync_always
        self.client_ports = {name: free_port() for name in SERVER_NAMES}
        self.route_ports = {name: free_port() for name in SERVER_NAMES}
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    def url(self, name: str) -> str:
        return f"nats://127.0.0.1:{self.client_ports[name]}"

    @property
    def urls(self) -> list[str]:
        return [self.url(name) for name in SERVER_NAMES]

    def _config(self, name: str) -> str:
        routes = ", ".join(
            f'"nats-route://127.0.0.1:{self.route_ports[other]}"'
            for other in SERVER_NAMES
            if other != name
        )
        sync = "  sync_interval: always\n" if self.sync_always else ""
        store_dir = os.path.join(self.base_dir, name, "jetstream")
        return (
            f'server_name: "{name}"\n'
            f'host: "127.0.0.1"\n'
            f"port: {self.client_ports[name]}\n"
            f'log_file: "{os.path.join(self.base_dir, name, "server.log")}"\n'
            f'jetstream {{\n  store_dir: "{store_dir}"\n{sync}}}\n'
            f'cluster {{\n  name: "{CLUSTER_NAME}"\n  host: "127.0.0.1"\n'
            f"  port: {self.route_ports[name]}\n  routes: [{routes}]\n}}\n"
        )

    def _spawn(self, name: str) -> None:
        server_dir = os.path.join(self.base_dir, name)
        os.makedirs(server_dir, exist_ok=True)
        config_path = os.path.join(server_dir, "server.conf")
        with open(config_path, "w", encoding="utf-8") as out:
            out.write(self._config(name))
        # The child keeps its own copy of the descriptor; ours closes with the block.
        with open(os.path.join(server_dir, "stderr.log"), "ab") as stderr:
            self._processes[name] = subprocess.Popen(
                [self.binary.path, "-c", config_path],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def log_tail(self, name: str) -> str:
        path = os.path.join(self.base_dir, name, "server.log")
        try:
            with open(path, errors="replace") as handle:
                return " | ".join(handle.read()[-2000:].strip().splitlines()[-3:])
        except OSError:
            return "(no log)"

    def _wait_listening(self, names: list[str]) -> None:
        deadline = time.monotonic() + PORT_WAIT_S
        pending = list(names)
        for _ in range(int(PORT_WAIT_S / 0.05) + 1):
            for name in list(pending):
                process = self._processes[name]
                if process.poll() is not None:
                    raise NatsClusterError(
                        f"nats-server {name} exited {process.returncode}: {self.log_tail(name)}"
                    )
                if _port_open(self.client_ports[name]):
                    pending.remove(name)
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if pending:
            raise NatsClusterError(f"nats-server {pending} not listening after {PORT_WAIT_S} s")

    def start(self) -> None:
        """Start all three servers and wait until each accepts clients (the JetStream meta
        leader may still be electing: callers retry their first stream request)."""
        try:
            for name in SERVER_NAMES:
                self._spawn(name)
            self._wait_listening(list(SERVER_NAMES))
        except BaseException:
            self.stop()
            raise

    def pid(self, name: str) -> int | None:
        process = self._processes.get(name)
        return process.pid if process is not None and process.poll() is None else None

    def kill(self, name: str) -> None:
        """SIGKILL server ``name`` (a crash) and reap it."""
        process = self._processes.pop(name, None)
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_WAIT_S)

    def restart(self, name: str) -> None:
        """Start ``name`` again on its ports and store (after ``kill``)."""
        self.kill(name)
        self._spawn(name)
        self._wait_listening([name])

    def stop(self) -> None:
        for process in self._processes.values():
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for process in self._processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5.0)
        self._processes.clear()

    def __enter__(self) -> NatsCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
