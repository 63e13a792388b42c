"""A follower that was down while the others rolled several segments and deleted the old ones
by retention catches up by segment transfer (RaftPeer.FetchSegments), then by normal
replication: it serves the same messages at the same offsets, and its CommitLog files are
byte-identical to the leader's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import LocalCluster
from tests.integration.test_failover import leader_address, status, wait_converged

TOPIC = "events"
QUEUE_COUNT = 2
SEGMENT_SIZE_BYTES = 64 << 10
BODY_BYTES = 1000
MESSAGES_PER_BATCH = 20
BATCHES = 25  # ~500 KB: about eight 64 KiB segments
RETENTION_WAIT_S = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    running = LocalCluster(
        str(tmp_path / "data"),
        base_port=0,
        extra_args=(
            "--segment-size-bytes",
            str(SEGMENT_SIZE_BYTES),
            "--max-body-bytes",
            str(16 << 10),
            "--file-reserved-hours",
            "0",
            "--disk-clean-watermark-ratio",
            "0.0001",
        ),
    )
    running.start(wait_timeout_s=30)
    try:
        yield running
    finally:
        running.stop()


def segment_names(data_dir: str) -> list[str]:
    return sorted(p.name for p in (Path(data_dir) / "store" / "commitlog").iterdir())


def test_a_follower_behind_the_retained_log_catches_up_by_segment_transfer(
    cluster: LocalCluster,
) -> None:
    leader = leader_address(cluster)
    with grpc.insecure_channel(leader) as channel:
        client_pb2_grpc.AdminStub(channel).CreateTopic(
            client_pb2.CreateTopicRequest(topic=TOPIC, queue_count=QUEUE_COUNT), timeout=10
        )
    follower = next(n for n, node in cluster.nodes.items() if node.address != leader)
    leader_id = next(n for n, node in cluster.nodes.items() if node.address == leader)
    cluster.stop_node(follower)
    with grpc.insecure_channel(leader) as channel:
        producer = client_pb2_grpc.ProducerStub(channel)
        for batch in range(BATCHES):
            producer.Produce(
                client_pb2.ProduceRequest(
                    topic=TOPIC,
                    messages=[
                        client_pb2.ProduceMessage(
                            queue_id=i % QUEUE_COUNT,
                            body=b"%d-%d-" % (batch, i) + b"x" * BODY_BYTES,
                        )
                        for i in range(MESSAGES_PER_BATCH)
                    ],
                ),
                timeout=10,
            )
    # Retention (every few seconds) deletes the sealed segments once the log is compacted.
    deadline = time.monotonic() + RETENTION_WAIT_S
    leader_dir = cluster.nodes[leader_id].data_dir
    while segment_names(leader_dir)[0] == "0" * 20:
        assert time.monotonic() < deadline, "retention deleted nothing on the leader"
        time.sleep(0.5)

    cluster.restart(follower)
    wait_converged(cluster, timeout_s=30)
    log_text = (Path(cluster.nodes[follower].data_dir) / "node.log").read_text()
    assert "installed snapshot" in log_text

    follower_address = cluster.nodes[follower].address
    for queue_id in range(QUEUE_COUNT):
        expected = [(m.queue_offset, m.body) for m in pull_queue_from_min(leader, queue_id)]
        got = [(m.queue_offset, m.body) for m in pull_queue_from_min(follower_address, queue_id)]
        assert got == expected and expected, queue_id
    follower_dir = cluster.nodes[follower].data_dir
    for name in set(segment_names(leader_dir)) & set(segment_names(follower_dir)):
        leader_bytes = (Path(leader_dir) / "store" / "commitlog" / name).read_bytes()
        follower_bytes = (Path(follower_dir) / "store" / "commitlog" / name).read_bytes()
        assert leader_bytes == follower_bytes, name
    # It then takes part in normal replication again.
    with grpc.insecure_channel(leader) as channel:
        answer = client_pb2_grpc.ProducerStub(channel).Produce(
            client_pb2.ProduceRequest(
                topic=TOPIC, messages=[client_pb2.ProduceMessage(queue_id=0, body=b"after")]
            ),
            timeout=10,
        )
    deadline = time.monotonic() + 10
    while status(follower_address).applied_index < answer.raft_index:
        assert time.monotonic() < deadline, "the follower does not replicate after the transfer"
        time.sleep(0.05)


def pull_queue_from_min(address: str, queue_id: int) -> list[client_pb2.StoredMessage]:
    with grpc.insecure_channel(address) as channel:
        first = client_pb2_grpc.ConsumerStub(channel).Pull(
            client_pb2.PullRequest(topic=TOPIC, queue_id=queue_id, queue_offset=0), timeout=5
        )
    start = (
        first.next_queue_offset if first.status == client_pb2.PULL_STATUS_OFFSET_TOO_SMALL else 0
    )
    messages: list[client_pb2.StoredMessage] = []
    with grpc.insecure_channel(address) as channel:
        consumer = client_pb2_grpc.ConsumerStub(channel)
        for _ in range(1000):
            answer = consumer.Pull(
                client_pb2.PullRequest(
                    topic=TOPIC,
                    queue_id=queue_id,
                    queue_offset=start + len(messages),
                    max_messages=1024,
                ),
                timeout=5,
            )
            if not answer.messages:
                return messages
            messages.extend(answer.messages)
    return messages
