"""Kill the leader (SIGKILL) of a real three-process cluster under steady produce load: a new
leader takes writes within seconds, no acknowledged message is lost or duplicated (idempotent
producer retrying across the failover), queue offsets are dense and identical on every
replica, a consumer group resumes from its committed offset, and the killed node, restarted,
catches up to byte-identical CommitLog files."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import LocalCluster

TOPIC = "events"
QUEUE_COUNT = 4
BATCH_MESSAGES = 8
BATCHES_BEFORE_KILL = 30
BATCHES_AFTER_KILL = 30
NEW_LEADER_WITHIN_S = 5.0
RETRY_BUDGET_S = 20.0
_RETRIABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    running = LocalCluster(
        str(tmp_path / "data"), base_port=0, extra_args=("--segment-size-bytes", str(8 << 20))
    )
    running.start(wait_timeout_s=30)
    try:
        yield running
    finally:
        running.stop()


def status(address: str) -> client_pb2.ClusterStatusResponse:
    with grpc.insecure_channel(address) as channel:
        return client_pb2_grpc.AdminStub(channel).ClusterStatus(
            client_pb2.ClusterStatusRequest(), timeout=2
        )


def leader_address(cluster: LocalCluster, exclude: str = "", timeout_s: float = 15.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for address in cluster.addresses:
            if address == exclude:
                continue
            try:
                answer = status(address)
            except grpc.RpcError:
                continue
            if answer.role == client_pb2.MEMBER_ROLE_LEADER:
                return address
        time.sleep(0.05)
    raise TimeoutError("no leader")


class IdempotentSender:
    """Sends numbered batches with one producer id, retrying each (same sequence) at whoever
    leads until it is acknowledged: what the client library does, written out here so the
    test checks the server's guarantees and not the library's."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster
        self._address = leader_address(cluster)
        self.sequence = 0
        self.acked: dict[bytes, client_pb2.ProduceResult] = {}
        self.ack_times: list[float] = []

    def send(self) -> None:
        self.sequence += 1
        bodies = [b"s%d-%d" % (self.sequence, i) for i in range(BATCH_MESSAGES)]
        request = client_pb2.ProduceRequest(
            topic=TOPIC,
            messages=[
                client_pb2.ProduceMessage(queue_id=(self.sequence + i) % QUEUE_COUNT, body=body)
                for i, body in enumerate(bodies)
            ],
            producer_id="failover-test",
            sequence=self.sequence,
        )
        deadline = time.monotonic() + RETRY_BUDGET_S
        while True:
            try:
                with grpc.insecure_channel(self._address) as channel:
                    response = client_pb2_grpc.ProducerStub(channel).Produce(request, timeout=2)
                break
            except grpc.RpcError as error:
                if error.code() not in _RETRIABLE or time.monotonic() > deadline:
                    raise
                trailers = dict(error.trailing_metadata() or ())
                self._address = str(trailers.get("raftlog-leader") or self._next_address())
                time.sleep(0.05)
        self.acked.update(zip(bodies, response.results, strict=True))
        self.ack_times.append(time.monotonic())

    def _next_address(self) -> str:
        addresses = self._cluster.addresses
        return addresses[(addresses.index(self._address) + 1) % len(addresses)]


def pull_queue(address: str, queue_id: int) -> list[client_pb2.StoredMessage]:
    messages: list[client_pb2.StoredMessage] = []
    with grpc.insecure_channel(address) as channel:
        consumer = client_pb2_grpc.ConsumerStub(channel)
        for _ in range(1000):
            answer = consumer.Pull(
                client_pb2.PullRequest(
                    topic=TOPIC, queue_id=queue_id, queue_offset=len(messages), max_messages=1024
                ),
                timeout=5,
            )
            if not answer.messages:
                return messages
            messages.extend(answer.messages)
    return messages


def wait_converged(cluster: LocalCluster, timeout_s: float = 20.0) -> int:
    """Every member applied the same, final index; returns it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            answers = [status(address) for address in cluster.addresses]
        except grpc.RpcError:
            time.sleep(0.1)
            continue
        applied = {a.applied_index for a in answers}
        last = {a.last_index for a in answers}
        if len(applied) == 1 and applied == last:
            return applied.pop()
        time.sleep(0.1)
    raise TimeoutError("replicas did not converge")


def commit_log_digest(data_dir: str) -> str:
    digest = hashlib.sha256()
    for path in sorted((Path(data_dir) / "store" / "commitlog").iterdir()):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def test_killing_the_leader_loses_no_acknowledged_message(cluster: LocalCluster) -> None:
    first_leader = leader_address(cluster)
    with grpc.insecure_channel(first_leader) as channel:
        client_pb2_grpc.AdminStub(channel).CreateTopic(
            client_pb2.CreateTopicRequest(topic=TOPIC, queue_count=QUEUE_COUNT), timeout=10
        )
    sender = IdempotentSender(cluster)
    for _ in range(BATCHES_BEFORE_KILL):
        sender.send()
    committed_offset = 5
    with grpc.insecure_channel(first_leader) as channel:
        client_pb2_grpc.ConsumerStub(channel).CommitOffsets(
            client_pb2.CommitOffsetsRequest(
                group="readers",
                offsets=[client_pb2.QueueOffset(topic=TOPIC, queue_id=0, queue_offset=5)],
            ),
            timeout=10,
        )

    victim = next(n for n, node in cluster.nodes.items() if node.address == first_leader)
    killed_at = time.monotonic()
    cluster.kill(victim)
    for _ in range(BATCHES_AFTER_KILL):
        sender.send()
    first_ack_after_kill = next(t for t in sender.ack_times if t > killed_at)
    assert first_ack_after_kill - killed_at < NEW_LEADER_WITHIN_S

    new_leader = leader_address(cluster, exclude=first_leader)
    with grpc.insecure_channel(new_leader) as channel:
        fetched = client_pb2_grpc.ConsumerStub(channel).FetchOffsets(
            client_pb2.FetchOffsetsRequest(
                group="readers", queues=[client_pb2.QueueRef(topic=TOPIC, queue_id=0)]
            ),
            timeout=10,
        )
    assert [o.queue_offset for o in fetched.offsets] == [committed_offset]

    cluster.restart(victim)
    wait_converged(cluster)
    by_replica = {
        address: [pull_queue(address, q) for q in range(QUEUE_COUNT)]
        for address in cluster.addresses
    }
    reference = by_replica[new_leader]
    stored = [m for queue in reference for m in queue]
    bodies = [m.body for m in stored]
    assert len(bodies) == len(set(bodies)), "duplicate messages"
    assert set(sender.acked) <= set(bodies), "acknowledged messages lost"
    for queue_id, queue in enumerate(reference):
        assert [m.queue_offset for m in queue] == list(range(len(queue))), f"queue {queue_id}"
    for body, result in sender.acked.items():
        match = next(m for m in stored if m.body == body)
        assert (match.queue_offset, match.physical_offset) == (
            result.queue_offset,
            result.physical_offset,
        )
    for address, queues in by_replica.items():
        assert [[(m.queue_offset, m.body) for m in q] for q in queues] == [
            [(m.queue_offset, m.body) for m in q] for q in reference
        ], address
    digests = {commit_log_digest(node.data_dir) for node in cluster.nodes.values()}
    assert len(digests) == 1, "CommitLog files differ between replicas"
