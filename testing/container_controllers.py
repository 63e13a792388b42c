"""ContainerControllers: the three controller members of a master-slave group in containers,
for RaftlogCluster(controlled=True): the node image run as ``raftlog controller start``, on the
cluster's own network, each reached by its alias (``c1:7800``; pysyncobj on ``c1:7801``).

Rules this module keeps:
- The group's password is random per run and passed in the environment
  (``RAFTLOG_CONTROLLER_PASSWORD``), never on a command line (it would show in ``ps``).
- Nothing is published on the host: only the brokers, on the same network, dial the
  controller; pysyncobj binds to the member's own address, never a wildcard.
- Every container and volume carries the cluster's labels, so RaftlogCluster.close (and a
  later sweep) removes them with the rest.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping

from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from raftlog.controller.config import PASSWORD_ENV

GRPC_PORT = 7800
RAFT_PORT = 7801
MEMBER_IDS = ("c1", "c2", "c3")
_DATA_DIR = "/data"
_STARTED_LINE = "controller member"  # what serve() logs once it listens


class ContainerControllers:
    def __init__(
        self, image: str, network: Network, labels: Mapping[str, str], name_prefix: str
    ) -> None:
        self.image = image
        self.network = network
        self.labels = dict(labels)
        self.name_prefix = name_prefix
        self.password = secrets.token_hex(16)
        self.containers: dict[str, DockerContainer] = {}

    @property
    def addresses(self) -> str:
        """What brokers get as ``RAFTLOG_CONTROLLER_ADDRESSES``."""
        return ",".join(f"{member}:{GRPC_PORT}" for member in MEMBER_IDS)

    def start(self, client: object, timeout_s: float = 60.0) -> None:
        """Create a volume and a container per member, start them, and wait until each one
        has logged that it serves."""
        peers = ",".join(f"{m}={m}:{RAFT_PORT}/{m}:{GRPC_PORT}" for m in MEMBER_IDS)
        for member in MEMBER_IDS:
            volume = f"{self.name_prefix}-{member}"
            client.volumes.create(name=volume, labels=self.labels)  # type: ignore[attr-defined]
            container = (
                DockerContainer(self.image)
                .with_name(volume)
                .with_network(self.network)
                .with_network_aliases(member)
                .with_volume_mapping(volume, _DATA_DIR, "rw")
                .with_env(PASSWORD_ENV, self.password)
                .with_command(
                    ["--id", member, "--peers", peers, "--data-dir", f"{_DATA_DIR}/controller"]
                )
                .with_kwargs(
                    labels=self.labels,
                    hostname=member,
                    entrypoint=["raftlog", "controller", "start"],
                    # The image's health check asks a node's port, which a controller lacks.
                    healthcheck={"test": ["NONE"]},
                )
            )
            self.containers[member] = container
            container.start()
        for member, container in self.containers.items():
            self._wait_serving(member, container, timeout_s)

    @staticmethod
    def _wait_serving(member: str, container: DockerContainer, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            stdout, stderr = container.get_logs()
            if _STARTED_LINE in (stdout + stderr).decode(errors="replace"):
                return
            wrapped = container.get_wrapped_container()
            wrapped.reload()
            if wrapped.status == "exited":
                raise RuntimeError(f"controller {member} exited: {stderr.decode()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"controller {member} did not start within {timeout_s:.0f} s")
            time.sleep(0.25)
