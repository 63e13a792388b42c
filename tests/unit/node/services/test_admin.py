"""The Admin read RPCs through a real gRPC server over a real MessageStore, ClusterStatus's
mapping of a ClusterView, and the bad Admin and Produce requests refused before the write path
(the writes themselves are tested against the real Raft node)."""

from __future__ import annotations

import grpc
import pytest

from raftlog.node.services.admin import cluster_status
from raftlog.node.write_path import ClusterView, MemberView
from raftlog.proto import client_pb2
from raftlog.store.topic_config import MAX_QUEUE_COUNT
from tests.unit.node.services.conftest import (
    QUEUE_COUNT,
    TOPIC,
    Harness,
    call_error,
    call_status,
    message,
)

Code = grpc.StatusCode
MemberRole = client_pb2.MemberRole
ReplicationState = client_pb2.ReplicationState


def test_list_topics_sorted(harness: Harness) -> None:
    harness.store.create_topic("alpha", 1)
    harness.store.create_topic("zeta", 8)
    response = harness.admin.ListTopics(client_pb2.ListTopicsRequest(), timeout=5)
    assert [(t.name, t.queue_count) for t in response.topics] == [
        ("alpha", 1),
        (TOPIC, QUEUE_COUNT),
        ("zeta", 8),
    ]


def test_describe_topic_per_queue_bounds(harness: Harness) -> None:
    harness.put([message(1, b"a"), message(1, b"b"), message(3, b"c")])
    newest = harness.store.get_messages(TOPIC, 1, 1).messages[0]
    response = harness.admin.DescribeTopic(client_pb2.DescribeTopicRequest(topic=TOPIC), timeout=5)
    assert (response.topic.name, response.topic.queue_count) == (TOPIC, QUEUE_COUNT)
    bounds = [
        (q.queue_id, q.min_queue_offset, q.max_queue_offset, q.last_store_timestamp_ms > 0)
        for q in response.queues
    ]
    assert bounds == [(0, 0, 0, False), (1, 0, 2, True), (2, 0, 0, False), (3, 0, 1, True)]
    assert response.queues[1].last_store_timestamp_ms == newest.store_timestamp_ms


@pytest.mark.parametrize(
    ("topic", "code"),
    [("", Code.INVALID_ARGUMENT), ("a b", Code.INVALID_ARGUMENT), ("nope", Code.NOT_FOUND)],
)
def test_describe_topic_bad_input(harness: Harness, topic: str, code: grpc.StatusCode) -> None:
    request = client_pb2.DescribeTopicRequest(topic=topic)
    assert call_status(harness.admin.DescribeTopic, request) == code


@pytest.mark.parametrize(
    ("topic", "queue_count", "words"),
    [
        ("", 1, "empty"),
        ("bad/name", 1, "characters"),
        ("x" * 128, 1, "127"),
        ("__raftlog_mine", 1, "reserved for raftlog's own use"),
        ("fresh", 0, "queue_count"),
        ("fresh", -1, "queue_count"),
        ("fresh", MAX_QUEUE_COUNT + 1, "queue_count"),
    ],
)
def test_create_topic_bad_input_is_invalid_argument(
    harness: Harness, topic: str, queue_count: int, words: str
) -> None:
    request = client_pb2.CreateTopicRequest(topic=topic, queue_count=queue_count)
    error = call_error(harness.admin.CreateTopic, request)
    assert error.code() == Code.INVALID_ARGUMENT
    assert words in error.details()


PRODUCE_BAD_REQUESTS = {
    "empty batch": client_pb2.ProduceRequest(topic=TOPIC),
    "both": client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage()], records=b"\x00"
    ),
    "bad topic": client_pb2.ProduceRequest(topic="a b", messages=[client_pb2.ProduceMessage()]),
    "empty topic": client_pb2.ProduceRequest(messages=[client_pb2.ProduceMessage()]),
    "reserved topic": client_pb2.ProduceRequest(
        topic="__raftlog_control", messages=[client_pb2.ProduceMessage()]
    ),
    "negative queue id": client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage(queue_id=-1)]
    ),
    "negative born timestamp": client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage(queue_id=0, born_timestamp_ms=-1)]
    ),
    "host bits in sys_flag": client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage(queue_id=0, sys_flag=0x20)]
    ),
    "long producer id": client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage()], producer_id="p" * 65, sequence=1
    ),
    "sequence 0": client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage()], producer_id="p"
    ),
}


@pytest.mark.parametrize("name", sorted(PRODUCE_BAD_REQUESTS))
def test_produce_bad_input_is_refused_before_the_write_path(harness: Harness, name: str) -> None:
    request = PRODUCE_BAD_REQUESTS[name]
    assert call_status(harness.producer.Produce, request) == Code.INVALID_ARGUMENT


def test_cluster_status_maps_roles_and_sorts_members() -> None:
    view = ClusterView(
        cluster_id="c1",
        node_id="n1",
        role="leader",
        leader_id="n1",
        leader_address="127.0.0.1:9001",
        term=5,
        commit_index=40,
        applied_index=39,
        last_index=41,
        members=[
            MemberView("n9", "h9:1", "learner", voter=False),
            MemberView(
                "n2",
                "h2:1",
                "follower",
                voter=True,
                has_progress=True,
                match_index=38,
                lag_entries=3,
                replication_state="replicate",
                inflight_appends=2,
                recent_active=True,
            ),
            MemberView("n1", "h1:1", "leader", voter=True, has_progress=True, match_index=41),
            MemberView("n3", "h3:1", "mystery", voter=True, replication_state="probe"),
        ],
        transferring_to=None,
    )
    response = cluster_status(view)
    assert (response.cluster_id, response.node_id, response.term) == ("c1", "n1", 5)
    assert response.role == MemberRole.MEMBER_ROLE_LEADER
    assert (response.leader_id, response.leader_address) == ("n1", "127.0.0.1:9001")
    assert (response.commit_index, response.applied_index, response.last_index) == (40, 39, 41)
    assert response.transferring_to == ""
    assert [m.node_id for m in response.members] == ["n1", "n2", "n3", "n9"]
    n1, n2, n3, n9 = response.members
    assert n1.role == MemberRole.MEMBER_ROLE_LEADER
    assert n2.role == MemberRole.MEMBER_ROLE_FOLLOWER
    assert n3.role == MemberRole.MEMBER_ROLE_UNKNOWN
    assert n9.role == MemberRole.MEMBER_ROLE_LEARNER and not n9.voter
    assert (n2.match_index, n2.lag_entries, n2.inflight_appends) == (38, 3, 2)
    assert n2.replication_state == ReplicationState.REPLICATION_STATE_REPLICATE
    assert n2.has_progress and n2.recent_active
    assert n3.replication_state == ReplicationState.REPLICATION_STATE_PROBE
    assert n9.replication_state == ReplicationState.REPLICATION_STATE_UNSPECIFIED


def test_cluster_status_without_a_leader() -> None:
    view = ClusterView("c1", "n2", "candidate", None, None, 6, 10, 10, 12, [], "n3")
    response = cluster_status(view)
    assert response.role == MemberRole.MEMBER_ROLE_CANDIDATE
    assert (response.leader_id, response.leader_address) == ("", "")
    assert response.transferring_to == "n3"
