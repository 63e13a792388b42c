"""A SIGKILLed leader is replaced within a few ticks, not an election timeout: its followers
see its peer stream end (node/peer/service.py) and forget it (raft forget_leader), so with
pre-vote and check-quorum on they elect a successor at once. A killed follower changes
nothing: the leader keeps its term. A write sent to a member that just lost its leader waits
for the election instead of failing at once, so the client need not guess when to retry; a
member leaderless for longer than an election takes (cut off from the majority) answers at
once, so the client moves on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.client.admin import Admin
from raftlog.client.errors import RaftlogError
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import LocalCluster
from tests.integration.test_failover import leader_address, status

# Election timeout 40 ticks x 50 ms = 2 s (randomised up to 4 s): without the early
# campaign no successor could be elected within NEW_LEADER_WITHIN_S of the kill.
ELECTION_TICKS = 40
NEW_LEADER_WITHIN_S = 1.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    running = LocalCluster(
        str(tmp_path / "data"),
        base_port=0,
        extra_args=("--election-ticks", str(ELECTION_TICKS)),
    )
    running.start(wait_timeout_s=30)
    try:
        yield running
    finally:
        running.stop()


def _node_at(cluster: LocalCluster, address: str) -> str:
    return next(n for n, node in cluster.nodes.items() if node.address == address)


def test_a_killed_leader_is_replaced_within_a_few_ticks(cluster: LocalCluster) -> None:
    old = leader_address(cluster)
    time.sleep(0.5)  # steady state: followers are in the leader's lease
    killed_at = time.monotonic()
    cluster.kill(_node_at(cluster, old))
    leader_address(cluster, exclude=old, timeout_s=10)
    assert time.monotonic() - killed_at < NEW_LEADER_WITHIN_S


def test_a_killed_follower_leaves_the_leader_and_its_term_alone(cluster: LocalCluster) -> None:
    leader = leader_address(cluster)
    term = status(leader).term
    follower = next(a for a in cluster.addresses if a != leader)
    cluster.kill(_node_at(cluster, follower))
    time.sleep(1.0)
    answer = status(leader)
    assert (leader_address(cluster), answer.term) == (leader, term)


@pytest.mark.parametrize("server_picks_queue", [False, True])
def test_a_write_to_a_member_that_knows_no_leader_waits_for_the_election(
    cluster: LocalCluster, server_picks_queue: bool
) -> None:
    # Explicit queue: the survivor may not have applied the topic yet (it learns commits
    # lazily); as the new leader it must apply its inherited log before it calls the topic
    # unknown. Server-picked queue (what the typed client sends): the survivor knows the
    # topic, and the write waits on the write path.
    with Admin(cluster.addresses) as admin:
        admin.create_topic("t", queue_count=1)
    leader = leader_address(cluster)
    lagging, survivor = [a for a in cluster.addresses if a != leader]
    if server_picks_queue:
        with Admin([survivor]) as admin:
            for _ in range(100):  # the survivor learns the commit within a tick
                try:
                    admin.describe_topic("t", address=survivor)
                    break
                except RaftlogError:
                    time.sleep(0.05)
    cluster.kill(_node_at(cluster, leader))
    cluster.kill(_node_at(cluster, lagging))
    deadline = time.monotonic() + 10
    while status(survivor).leader_id and time.monotonic() < deadline:
        time.sleep(0.02)  # it forgets the dead leader when that leader's stream ends
    assert not status(survivor).leader_id
    # Alone, the survivor cannot elect anyone; a peer comes back while the write waits.
    restarter = threading.Thread(target=cluster.restart, args=(_node_at(cluster, lagging),))
    restarter.start()
    message = client_pb2.ProduceMessage(body=b"x")
    if not server_picks_queue:
        message.queue_id = 0
    request = client_pb2.ProduceRequest(topic="t", messages=[message])
    try:
        with grpc.insecure_channel(survivor) as channel:
            stub = client_pb2_grpc.ProducerStub(channel)
            try:
                stub.Produce(request, timeout=20)
            except grpc.RpcError as error:
                # Not UNAVAILABLE ("no leader"): a redirect to the newly elected leader.
                assert error.code() is grpc.StatusCode.FAILED_PRECONDITION, error
    finally:
        restarter.join(60)


def test_a_member_leaderless_for_longer_than_an_election_answers_at_once(
    tmp_path: Path,
) -> None:
    with LocalCluster(str(tmp_path / "data"), base_port=0) as running:  # election window 2 s
        running.start(wait_timeout_s=30)
        with Admin(running.addresses) as admin:
            admin.create_topic("t", queue_count=1)
        leader = leader_address(running)
        other, survivor = [a for a in running.addresses if a != leader]
        running.kill(_node_at(running, leader))
        running.kill(_node_at(running, other))
        time.sleep(2.5)  # past two maximal election timeouts: no election can be under way
        request = client_pb2.ProduceRequest(
            topic="t", messages=[client_pb2.ProduceMessage(queue_id=0, body=b"x")]
        )
        with grpc.insecure_channel(survivor) as channel:
            stub = client_pb2_grpc.ProducerStub(channel)
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as refused:
                stub.Produce(request, timeout=10)
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
            assert time.monotonic() - started < 0.5
