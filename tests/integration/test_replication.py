"""A three-node cluster in this process (real gRPC servers, real files): writes go through
Raft, every replica serves the same committed messages at the same offsets, the write seam
answers followers with a redirect, and consumer offsets and producer sequences survive a
leadership change."""

from __future__ import annotations

import concurrent.futures
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.node.process import Node
from raftlog.node.replication.producer_table import MAX_SEQUENCES_AHEAD
from raftlog.node.replication.proposals import EARLY_WAIT_MS
from raftlog.proto import client_pb2
from tests.support.inprocess_cluster import InProcessCluster, running_cluster

TOPIC = "orders"
SEGMENT_SIZE_BYTES = 8 << 20


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    with running_cluster(tmp_path, segment_size_bytes=SEGMENT_SIZE_BYTES) as running:
        running.create_topic(TOPIC, 4)
        yield running


def produce(
    cluster: InProcessCluster,
    node_id: str,
    bodies: list[bytes],
    queue_id: int = 1,
    producer_id: str = "",
    sequence: int = 0,
) -> client_pb2.ProduceResponse:
    request = client_pb2.ProduceRequest(
        topic=TOPIC,
        messages=[
            client_pb2.ProduceMessage(
                queue_id=queue_id, body=body, keys=[body.decode()], tags="even" if i % 2 else ""
            )
            for i, body in enumerate(bodies)
        ],
        producer_id=producer_id,
        sequence=sequence,
    )
    return cluster.producer(node_id).Produce(request, timeout=10)


def wait_applied(cluster: InProcessCluster, index: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(n.replica.view.applied_index >= index for n in cluster.nodes.values()):
            return
        time.sleep(0.02)
    raise TimeoutError(f"not every replica applied index {index}")


def pull_all(cluster: InProcessCluster, node_id: str, queue_id: int = 1) -> list[tuple[int, bytes]]:
    response = cluster.consumer(node_id).Pull(
        client_pb2.PullRequest(topic=TOPIC, queue_id=queue_id, queue_offset=0, max_messages=1000),
        timeout=10,
    )
    return [(m.queue_offset, m.body) for m in response.messages]


def commit_log_digest(node: Node, end_physical_offset: int) -> str:
    digest = hashlib.sha256()
    log = node.store.commit_log
    position = log.min_offset
    while position < end_physical_offset:
        size = min(1 << 20, end_physical_offset - position)
        digest.update(log.read(position, size))
        position += size
    return digest.hexdigest()


def test_every_replica_serves_the_same_committed_messages(cluster: InProcessCluster) -> None:
    leader = cluster.leader()
    bodies = [b"m%d" % i for i in range(50)]
    results = []
    for start in range(0, 50, 10):
        response = produce(cluster, leader, bodies[start : start + 10])
        results.extend(response.results)
    assert [r.queue_offset for r in results] == list(range(50))
    wait_applied(cluster, response.raft_index)
    expected = list(enumerate(bodies))
    for node_id in cluster.nodes:
        assert pull_all(cluster, node_id) == expected
    # Replicas are byte-identical: the same bytes at the same offsets, so ids work anywhere.
    end = max(n.replica.visible_end_physical_offset for n in cluster.nodes.values())
    digests = {commit_log_digest(node, end) for node in cluster.nodes.values()}
    assert len(digests) == 1
    follower = next(n for n in cluster.nodes if n != leader)
    found = cluster.consumer(follower).QueryByMessageId(
        client_pb2.QueryByMessageIdRequest(msg_id=results[7].msg_id), timeout=5
    )
    assert found.message.body == b"m7"
    by_key = cluster.consumer(follower).QueryByKey(
        client_pb2.QueryByKeyRequest(topic=TOPIC, key="m9"), timeout=5
    )
    assert [m.body for m in by_key.messages] == [b"m9"]
    tagged = cluster.consumer(follower).Pull(
        client_pb2.PullRequest(topic=TOPIC, queue_id=1, queue_offset=0, tags=["even"]), timeout=5
    )
    assert all(m.queue_offset % 2 == 1 for m in tagged.messages) and tagged.messages


def test_a_follower_redirects_writes_to_the_leader(cluster: InProcessCluster) -> None:
    leader = cluster.leader()
    follower = next(n for n in cluster.nodes if n != leader)
    with pytest.raises(grpc.RpcError) as refused:
        produce(cluster, follower, [b"x"])
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    trailers = dict(refused.value.trailing_metadata() or ())
    assert trailers["raftlog-leader"] == cluster.addresses[leader]
    with pytest.raises(grpc.RpcError) as refused_topic:
        cluster.admin(follower).CreateTopic(
            client_pb2.CreateTopicRequest(topic="other", queue_count=1), timeout=5
        )
    assert refused_topic.value.code() is grpc.StatusCode.FAILED_PRECONDITION


def test_reserved_topics_are_refused(cluster: InProcessCluster) -> None:
    leader = cluster.leader()
    for call in (
        lambda: cluster.admin(leader).CreateTopic(
            client_pb2.CreateTopicRequest(topic="__raftlog_x", queue_count=1), timeout=5
        ),
        lambda: cluster.producer(leader).Produce(
            client_pb2.ProduceRequest(
                topic="__raftlog_control", messages=[client_pb2.ProduceMessage(body=b"x")]
            ),
            timeout=5,
        ),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            call()
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_idempotent_producer_stores_a_retried_batch_once_across_a_leader_change(
    cluster: InProcessCluster,
) -> None:
    leader = cluster.leader()
    first = produce(cluster, leader, [b"a", b"b"], producer_id="p1", sequence=1)
    again = produce(cluster, leader, [b"a", b"b"], producer_id="p1", sequence=1)
    assert again.duplicate and list(again.results) == list(first.results)
    with pytest.raises(grpc.RpcError) as gap:
        produce(cluster, leader, [b"c"], producer_id="p1", sequence=3)
    assert gap.value.code() is grpc.StatusCode.OUT_OF_RANGE
    wait_applied(cluster, first.raft_index)
    target = next(n for n in cluster.nodes if n != leader)
    cluster.admin(leader).TransferLeadership(
        client_pb2.TransferLeadershipRequest(target_id=target), timeout=15
    )
    new_leader = cluster.leader()
    assert new_leader == target
    retried = produce(cluster, new_leader, [b"a", b"b"], producer_id="p1", sequence=1)
    assert retried.duplicate and list(retried.results) == list(first.results)
    following = produce(cluster, new_leader, [b"c"], producer_id="p1", sequence=2)
    assert not following.duplicate
    assert [r.queue_offset for r in following.results] == [2]
    wait_applied(cluster, following.raft_index)
    assert pull_all(cluster, leader) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_an_idempotent_batch_ahead_of_its_predecessor_waits_for_it(
    cluster: InProcessCluster,
) -> None:
    """A producer with several requests in flight: sequence 2 reaching the leader before 1
    waits for it and is stored after it, not refused as a gap."""
    leader = cluster.leader()
    produce(cluster, leader, [b"a"], producer_id="p2", sequence=1)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(produce, cluster, leader, [b"c"], producer_id="p2", sequence=3)
        time.sleep(0.1)  # sequence 3 now waits at the leader
        behind = produce(cluster, leader, [b"b"], producer_id="p2", sequence=2)
        stored = ahead.result(timeout=10)
    assert not behind.duplicate and not stored.duplicate
    assert [r.queue_offset for r in behind.results] == [1]
    assert [r.queue_offset for r in stored.results] == [2]
    wait_applied(cluster, stored.raft_index)
    assert pull_all(cluster, leader) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_an_early_batch_whose_predecessor_never_comes_is_a_gap(cluster: InProcessCluster) -> None:
    leader = cluster.leader()
    term = cluster.nodes[leader].replica.node.term
    produce(cluster, leader, [b"a"], producer_id="p3", sequence=1)
    began = time.monotonic()
    with pytest.raises(grpc.RpcError) as gap:
        produce(cluster, leader, [b"c"], producer_id="p3", sequence=3)
    waited_s = time.monotonic() - began
    assert gap.value.code() is grpc.StatusCode.OUT_OF_RANGE
    assert EARLY_WAIT_MS / 1000 * 0.9 <= waited_s < 5.0
    following = produce(cluster, leader, [b"b"], producer_id="p3", sequence=2)
    wait_applied(cluster, following.raft_index)
    assert pull_all(cluster, leader) == [(0, b"a"), (1, b"b")]
    with pytest.raises(grpc.RpcError) as far:
        produce(cluster, leader, [b"z"], producer_id="p3", sequence=2 + MAX_SEQUENCES_AHEAD + 2)
    assert far.value.code() is grpc.StatusCode.OUT_OF_RANGE
    assert cluster.nodes[leader].replica.node.term == term


def test_consumer_offsets_survive_a_leader_change(cluster: InProcessCluster) -> None:
    leader = cluster.leader()
    produce(cluster, leader, [b"x"] * 5)
    offsets = [client_pb2.QueueOffset(topic=TOPIC, queue_id=1, queue_offset=3)]
    cluster.consumer(leader).CommitOffsets(
        client_pb2.CommitOffsetsRequest(group="g", offsets=offsets), timeout=10
    )
    target = next(n for n in cluster.nodes if n != leader)
    cluster.admin(leader).TransferLeadership(
        client_pb2.TransferLeadershipRequest(target_id=target), timeout=15
    )
    new_leader = cluster.leader()
    fetched = cluster.consumer(new_leader).FetchOffsets(
        client_pb2.FetchOffsetsRequest(
            group="g", queues=[client_pb2.QueueRef(topic=TOPIC, queue_id=1)]
        ),
        timeout=10,
    )
    assert [o.queue_offset for o in fetched.offsets] == [3]


def test_a_restarted_cluster_serves_the_same_state(cluster: InProcessCluster) -> None:
    leader = cluster.leader()
    first = produce(cluster, leader, [b"a", b"b", b"c"], producer_id="p9", sequence=1)
    cluster.consumer(leader).CommitOffsets(
        client_pb2.CommitOffsetsRequest(
            group="g", offsets=[client_pb2.QueueOffset(topic=TOPIC, queue_id=1, queue_offset=2)]
        ),
        timeout=10,
    )
    wait_applied(cluster, cluster.nodes[leader].replica.view.commit_index)
    cluster.restart_all()
    leader = cluster.leader()
    for node_id in cluster.nodes:
        deadline = time.monotonic() + 10
        while len(pull_all(cluster, node_id)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pull_all(cluster, node_id) == [(0, b"a"), (1, b"b"), (2, b"c")]
    fetched = cluster.consumer(leader).FetchOffsets(
        client_pb2.FetchOffsetsRequest(
            group="g", queues=[client_pb2.QueueRef(topic=TOPIC, queue_id=1)]
        ),
        timeout=10,
    )
    assert [o.queue_offset for o in fetched.offsets] == [2]
    # The producer table came back from the log: the retry is a duplicate.
    retried = produce(cluster, leader, [b"a", b"b", b"c"], producer_id="p9", sequence=1)
    assert retried.duplicate and list(retried.results) == list(first.results)
    following = produce(cluster, leader, [b"d"], producer_id="p9", sequence=2)
    assert [r.queue_offset for r in following.results] == [3]


def test_writes_are_refused_above_the_disk_full_watermark(tmp_path: Path) -> None:
    ratios = {
        "disk_clean_watermark_ratio": 1e-6,
        "disk_force_clean_ratio": 1e-6,
        "disk_full_ratio": 1e-6,
    }
    with running_cluster(tmp_path, segment_size_bytes=SEGMENT_SIZE_BYTES, **ratios) as full:
        leader = full.leader()
        # As if "t" had been created before the disk filled up.
        for node in full.nodes.values():
            node.store.create_topic("t", 1)
        for call in (
            lambda: full.admin(leader).CreateTopic(
                client_pb2.CreateTopicRequest(topic="u", queue_count=1), timeout=5
            ),
            lambda: full.producer(leader).Produce(
                client_pb2.ProduceRequest(
                    topic="t", messages=[client_pb2.ProduceMessage(body=b"x")]
                ),
                timeout=5,
            ),
        ):
            with pytest.raises(grpc.RpcError) as refused:
                call()
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "full" in (refused.value.details() or "")
