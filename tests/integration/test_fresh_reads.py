"""A member that is behind the leader does not deny what the group acknowledged
(node/services/fresh_read.py, node/replication/read_barrier.py): right after a topic is
created, or a message stored, through the leader, every member finds it. Before, a consumer
pinned to a follower, or an Admin call that reached one, got NOT_FOUND most of the time
(16 of 20 new topics in a probe). What truly does not exist is still NOT_FOUND, within the
barrier's bound, also when no quorum is left."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.client import Admin, Consumer, NotFoundError, Producer
from raftlog.testing.local_cluster import LocalCluster
from tests.integration.test_failover import leader_address
from tests.support.local_clusters import three_nodes

NEW_TOPICS = 8
# The barrier waits at most 1 s (fresh_read.CATCH_UP_MAX_S); the rest is the call itself.
NOT_FOUND_WITHIN_S = 3.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with three_nodes(tmp_path) as running:
        yield running


def leader_and_followers(cluster: LocalCluster) -> tuple[str, list[str]]:
    leader = leader_address(cluster)
    return leader, [a for a in cluster.addresses if a != leader]


def test_a_topic_just_created_on_the_leader_is_found_on_every_follower(
    cluster: LocalCluster,
) -> None:
    leader, followers = leader_and_followers(cluster)
    with Admin([leader]) as on_leader:
        for index in range(NEW_TOPICS):
            topic = f"fresh-{index}"
            on_leader.create_topic(topic, 2)
            follower = followers[index % len(followers)]
            # At once, on a follower: a consumer's first poll and an Admin description.
            with Consumer(follower, group=f"g{index}", topic=topic, from_beginning=True) as c:
                assert c.poll(timeout_s=0.2) == []
            with Admin([follower]) as on_follower:
                assert on_follower.describe_topic(topic).topic.queue_count == 2


def test_a_topic_just_created_on_the_leader_is_listed_by_every_follower(
    cluster: LocalCluster,
) -> None:
    leader, followers = leader_and_followers(cluster)
    with Admin([leader]) as on_leader, Admin([followers[0]]) as a, Admin([followers[1]]) as b:
        for index in range(NEW_TOPICS):
            topic = f"listed-{index}"
            on_leader.create_topic(topic, 1)
            on_follower = (a, b)[index % 2]
            assert topic in {info.name for info in on_follower.list_topics()}


def test_a_message_just_stored_is_found_by_id_on_a_follower(
    cluster: LocalCluster,
) -> None:
    leader, followers = leader_and_followers(cluster)
    with Admin([leader]) as admin:
        admin.create_topic("ids", 1)
    with Producer([leader]) as producer:
        for index in range(NEW_TOPICS):
            result = producer.send("ids", b"m%d" % index, queue_id=0)
            with Admin([followers[index % 2]]) as on_follower:
                assert on_follower.query_by_id(result.msg_id).body == b"m%d" % index


def test_what_does_not_exist_is_still_not_found_with_or_without_a_quorum(
    cluster: LocalCluster,
) -> None:
    follower = leader_and_followers(cluster)[1][0]
    with Admin([follower]) as admin:
        started = time.monotonic()
        with pytest.raises(NotFoundError):
            admin.describe_topic("never-created")
        assert time.monotonic() - started < NOT_FOUND_WITHIN_S
    # No quorum: the barrier cannot pass, and the member answers what it holds, in time.
    for node_id, node in cluster.nodes.items():
        if node.address != follower:
            cluster.stop_node(node_id, timeout_s=15)
    with Admin([follower]) as admin:
        started = time.monotonic()
        with pytest.raises(NotFoundError):
            admin.describe_topic("never-created")
        assert time.monotonic() - started < NOT_FOUND_WITHIN_S
        started = time.monotonic()
        assert "never-created" not in {info.name for info in admin.list_topics()}
        assert time.monotonic() - started < NOT_FOUND_WITHIN_S
