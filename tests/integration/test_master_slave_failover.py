"""A master-slave group under a controller, all in this process (three real pysyncobj
controller members, three real brokers with gRPC servers and files): the controller elects a
master, a SYNC_MASTER acknowledges once its in-sync set holds a write, a stopped master is
replaced from the in-sync set with every acknowledged write kept, the old master comes back as
a slave and ends byte-identical, and a master cut off from the controller fences itself
(refuses writes) before another can be elected."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.client import Admin, Producer
from raftlog.controller.config import ControllerConfig
from raftlog.controller.server import ControllerServer
from raftlog.node.config import NodeConfig
from raftlog.node.masterslave.group import MasterSlaveMember
from raftlog.node.process import Node
from raftlog.proto import client_pb2, client_pb2_grpc
from tests.support.inprocess_cluster import free_port, node_addresses

TOPIC = "orders"
LEASE_MS = 1000


class ControlledGroup:
    def __init__(self, root: Path) -> None:
        self.root = root
        peers = {
            f"c{i}": (f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}") for i in (1, 2, 3)
        }
        self.controllers = [
            ControllerServer(
                ControllerConfig(
                    member_id=member_id,
                    peers=peers,
                    data_dir=str(root / member_id),
                    password="test-secret",
                    lease_ms=LEASE_MS,
                )
            )
            for member_id in peers
        ]
        for controller in self.controllers:
            controller.start()
        self.controller_addresses = ",".join(grpc_address for _, grpc_address in peers.values())
        self.addresses = node_addresses(["b1", "b2", "b3"])
        self.nodes: dict[str, Node] = {}

    def start(self, node_id: str) -> None:
        node = Node(
            NodeConfig(
                node_id=node_id,
                listen_address=self.addresses[node_id],
                peers=dict(self.addresses),
                data_dir=str(self.root / node_id),
                replication="master-slave",
                broker_role="SYNC_MASTER",
                controller_addresses=self.controller_addresses,
                sync_flush_timeout_ms=2000,
            )
        )
        node.start()
        self.nodes[node_id] = node

    def stop(self, node_id: str) -> None:
        self.nodes.pop(node_id).stop()

    def master(self, timeout_s: float = 15.0, exclude: str | None = None) -> str:
        """The broker that is master and may write (its lease is live)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node_id, node in self.nodes.items():
                member = node.member
                assert isinstance(member, MasterSlaveMember)
                leads = member.roles.current().master_state is not None
                if node_id != exclude and leads and member.roles.lease_valid():
                    return node_id
            time.sleep(0.05)
        raise TimeoutError("no master with a lease")

    def close(self) -> None:
        for node_id in list(self.nodes):
            self.stop(node_id)
        for controller in self.controllers:
            controller.stop()

    def commit_log_files(self, node_id: str) -> dict[str, bytes]:
        directory = self.root / node_id / "store" / "commitlog"
        return {n: (directory / n).read_bytes() for n in sorted(os.listdir(directory))}


@pytest.fixture
def group(tmp_path: Path) -> Iterator[ControlledGroup]:
    running = ControlledGroup(tmp_path)
    try:
        for node_id in ("b1", "b2", "b3"):
            running.start(node_id)
        yield running
    finally:
        running.close()


def _send_until_ok(producer: Producer, body: bytes, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if producer.send(TOPIC, body).send_status == "SEND_OK":
                return
        except Exception:  # an election under way: retry, bounded by the deadline
            pass
        assert time.monotonic() < deadline, "no SEND_OK within the deadline"
        time.sleep(0.05)


def test_failover_keeps_every_acknowledged_write(group: ControlledGroup) -> None:
    first = group.master()
    everyone = list(group.addresses.values())
    with Admin(everyone) as admin:
        admin.create_topic(TOPIC, 1)
    acked: list[bytes] = []
    with Producer(everyone, timeout_s=20) as producer:
        _send_until_ok(producer, b"warm-up")  # the in-sync set has grown to two
        acked.append(b"warm-up")
        for i in range(20):
            result = producer.send(TOPIC, b"before %d" % i)
            assert result.send_status == "SEND_OK"
            acked.append(b"before %d" % i)
        stopped_at = time.monotonic()
        group.stop(first)
        _send_until_ok(producer, b"after")
        failover_s = time.monotonic() - stopped_at
        acked.append(b"after")
    second = group.master()
    assert second != first
    print(f"master {first} stopped -> first SEND_OK on {second}: {failover_s:.2f} s")
    bodies = [m.body for m in group.nodes[second].store.get_messages(TOPIC, 0, 0, 1000)]
    # Every acknowledged write survived, in order, once. (A send answered "stored, not
    # replicated" and sent again while the in-sync set grew may be there twice: that is
    # the honest answer's meaning, so only SEND_OK writes are counted here.)
    befores = [b for b in bodies if b.startswith(b"before")]
    assert befores == [b"before %d" % i for i in range(20)]
    assert set(acked) <= set(bodies)
    group.start(first)  # the old master comes back: it follows and ends byte-identical
    deadline = time.monotonic() + 15
    while group.commit_log_files(first) != group.commit_log_files(second):
        assert time.monotonic() < deadline, "the old master did not catch up"
        time.sleep(0.1)


def test_a_master_cut_off_from_its_controller_fences_itself(group: ControlledGroup) -> None:
    master = group.master()
    with Admin(list(group.addresses.values())) as admin:
        admin.create_topic(TOPIC, 1)
    with Producer(list(group.addresses.values())) as producer:
        _send_until_ok(producer, b"in sync")  # the slaves are in the in-sync set
    stub = client_pb2_grpc.ProducerStub(grpc.insecure_channel(group.addresses[master]))
    request = client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage(queue_id=0, body=b"x")]
    )
    stub.Produce(request, timeout=5)
    member = group.nodes[master].member
    assert isinstance(member, MasterSlaveMember) and member._link is not None
    member._link.close()  # its heartbeats stop: as if a partition cut it from the controller
    cut_at = time.monotonic()
    refused_at = None
    while time.monotonic() - cut_at < 10:
        try:
            stub.Produce(request, timeout=5)
        except grpc.RpcError as error:
            assert error.code() in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.FAILED_PRECONDITION,
            )
            refused_at = time.monotonic()
            break
        time.sleep(0.02)
    assert refused_at is not None, "the cut-off master kept taking writes"
    fenced_s = refused_at - cut_at
    successor = group.master(exclude=master)
    elected_s = time.monotonic() - cut_at
    print(f"cut off -> fenced after {fenced_s:.2f} s; another master after {elected_s:.2f} s")
    assert fenced_s < LEASE_MS / 1000  # fenced before its lease could let another be elected
    assert successor != master
