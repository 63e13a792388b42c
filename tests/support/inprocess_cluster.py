"""Three real nodes (real gRPC servers on 127.0.0.1, real files) in the test process, for
integration tests that need no process kills; tests that kill use testing/local_cluster.py."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc

from raftlog.node.config import NodeConfig
from raftlog.node.process import Node
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import free_ports

_LEADER_WAIT_S = 15.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def node_addresses(node_ids: list[str]) -> dict[str, str]:
    """127.0.0.1 addresses for ``node_ids``: no two ports the same, each node's peer port
    (client port + 1000, the default) free and distinct too."""
    return {
        node_id: f"127.0.0.1:{port}"
        for node_id, port in zip(node_ids, free_ports(len(node_ids)), strict=True)
    }


class InProcessCluster:
    def __init__(self, root: Path, node_count: int = 3, **config: object) -> None:
        self.addresses = node_addresses([f"n{i}" for i in range(1, node_count + 1)])
        self._root = root
        self._config = config
        self.nodes = {node_id: self._new_node(node_id) for node_id in self.addresses}
        self._channels: dict[str, grpc.Channel] = {}

    def _new_node(self, node_id: str) -> Node:
        return Node(
            NodeConfig(
                node_id=node_id,
                listen_address=self.addresses[node_id],
                peers=dict(self.addresses),
                data_dir=str(self._root / node_id),
                **self._config,  # type: ignore[arg-type]
            )
        )

    def restart_all(self) -> None:
        """Stop every node (gracefully) and start new ones on the same directories and
        addresses: everything they serve must come back from disk."""
        for node in self.nodes.values():
            node.stop()
        self.nodes = {node_id: self._new_node(node_id) for node_id in self.addresses}
        self.start()

    def start(self) -> None:
        for node in self.nodes.values():
            node.start()

    def stop(self) -> None:
        for channel in self._channels.values():
            channel.close()
        for node in self.nodes.values():
            node.stop()

    def channel(self, node_id: str) -> grpc.Channel:
        if node_id not in self._channels:
            self._channels[node_id] = grpc.insecure_channel(self.addresses[node_id])
        return self._channels[node_id]

    def leader(self, timeout_s: float = _LEADER_WAIT_S) -> str:
        """The leader once it accepts writes (its first entry of the term is applied)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node_id, node in self.nodes.items():
                view = node.replica.view
                if view.role == "leader" and view.applied_index >= view.commit_index > 0:
                    return node_id
            time.sleep(0.02)
        raise TimeoutError(f"no leader within {timeout_s} s")

    def admin(self, node_id: str) -> client_pb2_grpc.AdminStub:
        return client_pb2_grpc.AdminStub(self.channel(node_id))

    def producer(self, node_id: str) -> client_pb2_grpc.ProducerStub:
        return client_pb2_grpc.ProducerStub(self.channel(node_id))

    def consumer(self, node_id: str) -> client_pb2_grpc.ConsumerStub:
        return client_pb2_grpc.ConsumerStub(self.channel(node_id))

    def create_topic(self, topic: str, queue_count: int) -> None:
        leader = self.leader()
        self.admin(leader).CreateTopic(
            client_pb2.CreateTopicRequest(topic=topic, queue_count=queue_count), timeout=10
        )


@contextmanager
def running_cluster(root: Path, **config: object) -> Iterator[InProcessCluster]:
    cluster = InProcessCluster(root, **config)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
