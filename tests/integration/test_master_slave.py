"""A static master-slave group in this process (real gRPC servers, real files): one master
(broker_id 0) and two slaves streaming its CommitLog. The typed client works unchanged; the
slaves are byte-identical and serve the same messages; a slave sends consumers to its live
master unless ``slave_read_enable``, and serves them itself once the master is gone; a
SYNC_MASTER answers honestly when its slaves are gone; the HA stream refuses bad and hostile
reports."""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.client import Admin, Consumer, Producer
from raftlog.node.config import NodeConfig, derived_peer_address
from raftlog.node.masterslave.epochs import FIRST_EPOCH, EpochEntry, EpochHistory
from raftlog.node.masterslave.group import MasterSlaveMember
from raftlog.node.process import Node
from raftlog.proto import client_pb2, client_pb2_grpc, peer_pb2, peer_pb2_grpc
from raftlog.store.errors import CorruptRecordError
from tests.support.inprocess_cluster import node_addresses

TOPIC = "orders"


class Group:
    """n1 is the master; n2 and n3 are its slaves."""

    def __init__(self, root: Path, role: str, **config: object) -> None:
        self.root = root
        self.role = role
        self.config = config
        self.addresses = node_addresses(["n1", "n2", "n3"])
        self.nodes: dict[str, Node] = {}

    def start(self, node_id: str) -> Node:
        master = node_id == "n1"
        node = Node(
            NodeConfig(
                node_id=node_id,
                listen_address=self.addresses[node_id],
                peers=dict(self.addresses),
                data_dir=str(self.root / node_id),
                replication="master-slave",
                broker_id=0 if master else int(node_id[1:]) - 1,
                broker_role=self.role if master else "SLAVE",
                ha_master_address=None if master else self.addresses["n1"],
                **self.config,  # type: ignore[arg-type]
            )
        )
        node.start()
        self.nodes[node_id] = node
        return node

    def stop(self, node_id: str) -> None:
        self.nodes.pop(node_id).stop()

    def wait_caught_up(self, timeout_s: float = 10.0) -> None:
        master_end = self.nodes["n1"].store.commit_log.max_offset
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            slaves = [n for i, n in self.nodes.items() if i != "n1"]
            if all(n.store.dispatched_physical_offset >= master_end for n in slaves):
                return
            time.sleep(0.02)
        raise TimeoutError("the slaves did not catch up")

    def commit_log_files(self, node_id: str) -> dict[str, bytes]:
        directory = self.root / node_id / "store" / "commitlog"
        return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


@pytest.fixture
def sync_group(tmp_path: Path) -> Iterator[Group]:
    group = Group(tmp_path, "SYNC_MASTER", sync_flush_timeout_ms=1000)
    for node_id in ("n1", "n2", "n3"):
        group.start(node_id)
    try:
        yield group
    finally:
        for node_id in list(group.nodes):
            group.stop(node_id)


def test_the_typed_client_writes_and_the_slaves_are_byte_identical(sync_group: Group) -> None:
    group = sync_group
    master, slave = group.addresses["n1"], group.addresses["n2"]
    with Admin(master) as admin:
        admin.create_topic(TOPIC, 2)
    # Sent to a slave: the client follows the redirect to the master, idempotent by default.
    with Producer([slave]) as producer:
        results = [producer.send(TOPIC, f"m{i}".encode(), key=f"k{i}") for i in range(40)]
    assert {r.send_status for r in results} == {"SEND_OK"}
    assert all(r.replicated for r in results)
    group.wait_caught_up()
    assert sum(map(len, group.commit_log_files("n1").values())) > 40 * 100
    assert group.commit_log_files("n2") == group.commit_log_files("n1")
    assert group.commit_log_files("n3") == group.commit_log_files("n1")
    with Admin(master) as admin:
        status = admin.cluster_status(address=master)
        seen_from_slave = admin.cluster_status(address=slave)
    assert (status.replication, status.broker_role, status.role) == (
        "master-slave",
        "SYNC_MASTER",
        "leader",
    )
    assert {m.node_id: (m.in_sync, m.lag_bytes) for m in status.members} == {
        "n1": (True, 0),
        "n2": (True, 0),
        "n3": (True, 0),
    }
    assert (seen_from_slave.broker_role, seen_from_slave.leader_id) == ("SLAVE", "n1")
    # The slave learned the topic from the stream and holds the same messages (its own copy,
    # asked for explicitly: by default it sends consumers on to its master).
    assert sorted(_bodies(slave, this_replica=True)) == sorted(f"m{i}".encode() for i in range(40))


def _pull(address: str, *, this_replica: bool = False) -> client_pb2.PullResponse:
    stub = client_pb2_grpc.ConsumerStub(grpc.insecure_channel(address))
    request = client_pb2.PullRequest(
        topic=TOPIC, queue_id=0, queue_offset=0, max_messages=100, this_replica=this_replica
    )
    return stub.Pull(request, timeout=5)


def _bodies(address: str, *, this_replica: bool = False) -> list[bytes]:
    with grpc.insecure_channel(address) as channel:
        stub = client_pb2_grpc.ConsumerStub(channel)
        bodies: list[bytes] = []
        for queue_id in (0, 1):
            request = client_pb2.PullRequest(
                topic=TOPIC, queue_id=queue_id, max_messages=100, this_replica=this_replica
            )
            bodies += [m.body for m in stub.Pull(request, timeout=5).messages]
        return bodies


def _poll_all(consumer: Consumer, count: int) -> list[bytes]:
    seen: list[bytes] = []
    for _ in range(100):
        seen += [m.body for m in consumer.poll(timeout_s=0.2)]
        if len(seen) >= count:
            break
    return seen


def test_a_slave_sends_consumers_to_its_live_master(sync_group: Group) -> None:
    group = sync_group
    master, slave = group.addresses["n1"], group.addresses["n2"]
    with Admin(master) as admin:
        admin.create_topic(TOPIC, 1)
    with Producer([master]) as producer:
        for i in range(5):
            assert producer.send(TOPIC, b"m%d" % i).send_status == "SEND_OK"
    group.wait_caught_up()
    with pytest.raises(grpc.RpcError) as redirected:
        _pull(slave)
    assert redirected.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "n1" in (redirected.value.details() or "")
    assert len(_pull(slave, this_replica=True).messages) == 5
    # The typed consumer, given only the slave, follows the redirect.
    with Consumer([slave], "g", TOPIC, from_beginning=True) as consumer:
        assert _poll_all(consumer, 5) == [b"m%d" % i for i in range(5)]
    # The master gone, the slave serves what it holds: the group stays readable.
    group.stop("n1")
    deadline = time.monotonic() + 10
    while True:
        try:
            answer = _pull(slave)
            break
        except grpc.RpcError:
            assert time.monotonic() < deadline, "the slave never served with its master gone"
            time.sleep(0.1)
    assert [m.body for m in answer.messages] == [b"m%d" % i for i in range(5)]


def test_slave_read_enable_lets_a_slave_serve_consumers(tmp_path: Path) -> None:
    group = Group(tmp_path, "ASYNC_MASTER", slave_read_enable=True)
    try:
        for node_id in ("n1", "n2"):
            group.start(node_id)
        with Admin(group.addresses["n1"]) as admin:
            admin.create_topic(TOPIC, 1)
        with Producer([group.addresses["n1"]]) as producer:
            producer.send(TOPIC, b"one")
        group.wait_caught_up()
        assert [m.body for m in _pull(group.addresses["n2"]).messages] == [b"one"]
    finally:
        for node_id in list(group.nodes):
            group.stop(node_id)


def test_a_sync_master_says_when_no_slave_holds_the_write(sync_group: Group) -> None:
    group = sync_group
    master = group.addresses["n1"]
    with Admin(master) as admin:
        admin.create_topic(TOPIC, 1)
    group.stop("n2")
    group.stop("n3")
    with Producer(master) as producer:
        alone = producer.send(TOPIC, b"only on the master")
        assert (alone.send_status, alone.replicated) == ("SLAVE_NOT_AVAILABLE", False)
        # Stored all the same: the master serves it.
        got = group.nodes["n1"].store.get_messages(TOPIC, 0, alone.queue_offset, 1)
        assert [m.body for m in got] == [b"only on the master"]
        group.start("n2")  # comes back, catches up from where it stopped, counts again
        deadline = time.monotonic() + 10
        status = ""
        while time.monotonic() < deadline and status != "SEND_OK":
            status = producer.send(TOPIC, b"again").send_status
            time.sleep(0.05)
        assert status == "SEND_OK"
    group.wait_caught_up()
    assert group.commit_log_files("n2") == group.commit_log_files("n1")


def test_an_idempotent_retry_is_stored_once(sync_group: Group) -> None:
    group = sync_group
    with Admin(group.addresses["n1"]) as admin:
        admin.create_topic(TOPIC, 1)
    stub = client_pb2_grpc.ProducerStub(grpc.insecure_channel(group.addresses["n1"]))
    request = client_pb2.ProduceRequest(
        topic=TOPIC,
        messages=[client_pb2.ProduceMessage(queue_id=0, body=b"once")],
        producer_id="p1",
        sequence=1,
    )
    first = stub.Produce(request, timeout=10)
    again = stub.Produce(request, timeout=10)
    assert (again.duplicate, again.results[0].msg_id) == (True, first.results[0].msg_id)
    request.sequence = 3
    with pytest.raises(grpc.RpcError) as gap:
        stub.Produce(request, timeout=10)
    assert gap.value.code() is grpc.StatusCode.OUT_OF_RANGE
    # The master restarts (its table is rebuilt from the markers in its log): the retry is
    # "stored once, offsets forgotten", never a second copy.
    group.stop("n1")
    group.start("n1")
    request.sequence = 1
    with pytest.raises(grpc.RpcError) as forgotten:
        stub.Produce(request, timeout=10)
    assert forgotten.value.code() is grpc.StatusCode.ALREADY_EXISTS
    request.sequence = 2
    assert not stub.Produce(request, timeout=10).duplicate
    got = group.nodes["n1"].store.get_messages(TOPIC, 0, 0, 10)
    assert [m.body for m in got] == [b"once", b"once"]  # sequences 1 and 2, once each


def _replicate(address: str, *reports: peer_pb2.SlaveReport) -> grpc.RpcError:
    stub = peer_pb2_grpc.HaPeerStub(grpc.insecure_channel(address))
    with pytest.raises(grpc.RpcError) as refused:
        for _ in stub.Replicate(iter(reports), timeout=5):
            pass
    return refused.value


def test_the_ha_stream_refuses_bad_reports(sync_group: Group) -> None:
    master = sync_group.addresses["n1"]
    # The HA stream is served on the peer port only.
    assert _replicate(master).code() is grpc.StatusCode.UNIMPLEMENTED
    master_peer = derived_peer_address(master)
    good = {"cluster_id": "raftlog", "broker_name": "broker-a", "node_id": "x"}
    wrong_cluster = _replicate(master_peer, peer_pb2.SlaveReport(**{**good, "cluster_id": "other"}))
    assert wrong_cluster.code() is grpc.StatusCode.INVALID_ARGUMENT
    disordered = [peer_pb2.EpochEntry(epoch=2, start_offset=0), peer_pb2.EpochEntry(epoch=1)]
    bad_epochs = _replicate(master_peer, peer_pb2.SlaveReport(**good, epochs=disordered))
    assert bad_epochs.code() is grpc.StatusCode.INVALID_ARGUMENT
    # Only the group's members may stream.
    stranger = _replicate(master_peer, peer_pb2.SlaveReport(**good))
    assert stranger.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "'x' is not a member of broker 'broker-a'" in (stranger.details() or "")
    # A slave claiming bytes past the master's end is told to drop them, nothing more.
    member = {**good, "node_id": "n3"}
    stub = peer_pb2_grpc.HaPeerStub(grpc.insecure_channel(master_peer))
    stream = stub.Replicate(iter([peer_pb2.SlaveReport(**member, max_offset=1 << 40)]), timeout=5)
    first = next(stream)
    stream.cancel()
    end = sync_group.nodes["n1"].store.commit_log.max_offset
    assert (first.truncate, first.physical_offset, first.data) == (True, end, b"")
    negative = _replicate(master_peer, peer_pb2.SlaveReport(**good, max_offset=-5))
    assert negative.code() is grpc.StatusCode.INVALID_ARGUMENT
    # A slave serves no HA stream: it names its master.
    slave = _replicate(
        derived_peer_address(sync_group.addresses["n2"]), peer_pb2.SlaveReport(**good)
    )
    assert slave.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert master in (slave.details() or "")
    # The master still streams to its real slaves: nothing above disturbed it.
    with Admin(master) as admin:
        admin.create_topic(TOPIC, 1)
    with Producer(master) as producer:
        assert producer.send(TOPIC, b"still fine").send_status == "SEND_OK"


def test_a_corrupt_chunk_is_refused_by_a_slave(tmp_path: Path) -> None:
    group = Group(tmp_path, "ASYNC_MASTER")
    slave = group.start("n2")  # its master is not even up: it keeps retrying, bounded
    try:
        data = b"not a record" * 4
        chunk = peer_pb2.CommitLogChunk(physical_offset=0, data=data, data_crc32=zlib.crc32(data))
        replicator = slave.member._replicator  # type: ignore[union-attr]
        with pytest.raises(CorruptRecordError):
            replicator._store_chunk(chunk)
        chunk.data_crc32 ^= 1  # a byte flipped on the way: the chunk CRC refuses it
        with pytest.raises(ValueError, match="CRC mismatch"):
            replicator._store_chunk(chunk)
        assert slave.store.commit_log.max_offset == 0
    finally:
        group.stop("n2")


def test_a_deposed_masters_tail_is_truncated_when_it_follows_again(sync_group: Group) -> None:
    """n2 is cut off, believes itself master of epoch 1 and takes writes nobody copies; back
    as a slave, the epoch histories show where its log stops agreeing with n1's: it drops its
    tail there and copies n1's bytes, ending byte-identical."""
    group = sync_group
    with Admin(group.addresses["n1"]) as admin:
        admin.create_topic(TOPIC, 1)
    with Producer(group.addresses["n1"]) as producer:
        for i in range(10):
            producer.send(TOPIC, f"common {i}".encode())
    group.wait_caught_up()
    group.stop("n2")
    shared_end = EpochHistory.load(str(group.root / "n2"))
    n2_store_end = _commit_log_end(group.root / "n2")
    shared_end.begin(1, n2_store_end)  # what a new master of epoch 1 records first
    alone = Node(
        NodeConfig(
            node_id="n2",
            listen_address=group.addresses["n2"],
            peers={"n2": group.addresses["n2"]},
            data_dir=str(group.root / "n2"),
            replication="master-slave",
            broker_role="ASYNC_MASTER",
        )
    )
    alone.start()
    try:
        with Producer(group.addresses["n2"]) as producer:
            for i in range(3):
                producer.send(TOPIC, f"lost {i}".encode())
    finally:
        alone.stop()
    with Producer(group.addresses["n1"]) as producer:
        for i in range(5):
            producer.send(TOPIC, f"after {i}".encode())
    group.start("n2")
    group.wait_caught_up()
    assert group.commit_log_files("n2") == group.commit_log_files("n1")
    got = group.nodes["n2"].store.get_messages(TOPIC, 0, 0, 100)
    assert [m.body for m in got] == [f"common {i}".encode() for i in range(10)] + [
        f"after {i}".encode() for i in range(5)
    ]
    assert EpochHistory.load(str(group.root / "n2")).entries == [FIRST_EPOCH]


def _commit_log_end(data_dir: Path) -> int:
    from raftlog.store.filesystem import OsFileSystem
    from raftlog.store.message_store import MessageStore

    store = MessageStore.open(
        NodeConfig(
            node_id="x",
            listen_address="127.0.0.1:1",
            peers={"x": "127.0.0.1:1"},
            data_dir=str(data_dir),
        ).store_config(),
        OsFileSystem(),
        housekeeping_interval_ms=None,
    )
    try:
        return store.commit_log.max_offset
    finally:
        store.close()


def test_a_switchover_moves_the_master_and_every_replica_follows(sync_group: Group) -> None:
    """What a controller drives: n2 becomes the master of epoch 1, n1 steps down and follows
    it with n3. Writes go to n2 (n1 redirects), every replica ends byte-identical, and all
    three record that epoch 1 began where n1's log ended."""
    group = sync_group
    with Admin(group.addresses["n1"]) as admin:
        admin.create_topic(TOPIC, 1)
    with Producer(group.addresses["n1"]) as producer:
        for i in range(5):
            producer.send(TOPIC, f"epoch 0 #{i}".encode())
    group.wait_caught_up()
    end_of_epoch_0 = group.nodes["n1"].store.commit_log.max_offset
    members = {node_id: node.member for node_id, node in group.nodes.items()}
    for member in members.values():
        assert isinstance(member, MasterSlaveMember)
    members["n2"].become_master(1)  # type: ignore[union-attr]
    members["n1"].follow("n2", 1)  # type: ignore[union-attr]
    members["n3"].follow("n2", 1)  # type: ignore[union-attr]
    with Producer(group.addresses["n1"]) as producer:  # follows the redirect to n2
        results = [producer.send(TOPIC, f"epoch 1 #{i}".encode()) for i in range(5)]
    assert {r.send_status for r in results} == {"SEND_OK"}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ends = {n: node.store.dispatched_physical_offset for n, node in group.nodes.items()}
        if len(set(ends.values())) == 1:
            break
        time.sleep(0.02)
    assert group.commit_log_files("n1") == group.commit_log_files("n2")
    assert group.commit_log_files("n3") == group.commit_log_files("n2")
    for node_id in ("n1", "n2", "n3"):
        assert EpochHistory.load(str(group.root / node_id)).entries == [
            FIRST_EPOCH,
            EpochEntry(1, end_of_epoch_0),
        ]
    with Admin(group.addresses["n3"]) as admin:
        status = admin.cluster_status(address=group.addresses["n1"])
    assert (status.leader_id, status.term, status.broker_role) == ("n2", 1, "SLAVE")
