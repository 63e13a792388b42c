"""Consumer and Admin against a real gRPC server scripted with an in-memory topic."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from raftlog.client.admin import Admin
from raftlog.client.consumer import Consumer
from raftlog.proto import client_pb2
from tests.unit.client.fake_server import FakeServer

QUEUES = {0: [b"a0", b"a1", b"a2"], 1: [b"b0"]}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer().start()
    committed: dict[int, int] = {1: 1}
    fake.committed = committed  # type: ignore[attr-defined]

    def describe(request: Any, context: Any) -> Any:
        return client_pb2.DescribeTopicResponse(
            topic=client_pb2.TopicInfo(name=request.topic, queue_count=2),
            queues=[
                client_pb2.QueueInfo(queue_id=q, min_queue_offset=0, max_queue_offset=len(m))
                for q, m in QUEUES.items()
            ],
        )

    def fetch(request: Any, context: Any) -> Any:
        return client_pb2.FetchOffsetsResponse(
            offsets=[
                client_pb2.FetchedOffset(
                    topic=r.topic,
                    queue_id=r.queue_id,
                    found=r.queue_id in committed,
                    queue_offset=committed.get(r.queue_id, 0),
                )
                for r in request.queues
            ]
        )

    def pull(request: Any, context: Any) -> Any:
        bodies = QUEUES[request.queue_id]
        if request.queue_offset >= len(bodies):
            return client_pb2.PullResponse(
                status=client_pb2.PULL_STATUS_NO_NEW_MESSAGES,
                next_queue_offset=request.queue_offset,
                max_queue_offset=len(bodies),
            )
        chosen = bodies[request.queue_offset :][: request.max_messages]
        return client_pb2.PullResponse(
            status=client_pb2.PULL_STATUS_FOUND,
            messages=[
                client_pb2.StoredMessage(
                    topic=request.topic,
                    queue_id=request.queue_id,
                    queue_offset=request.queue_offset + i,
                    body=body,
                    born_host=client_pb2.HostPort(ip="::1", port=5),
                    store_host=client_pb2.HostPort(ip="127.0.0.1", port=7701),
                )
                for i, body in enumerate(chosen)
            ],
            next_queue_offset=request.queue_offset + len(chosen),
            max_queue_offset=len(bodies),
        )

    def commit(request: Any, context: Any) -> Any:
        for offset in request.offsets:
            committed[offset.queue_id] = offset.queue_offset
        return client_pb2.CommitOffsetsResponse(raft_index=42)

    def by_time(request: Any, context: Any) -> Any:
        return client_pb2.QueryOffsetByTimeResponse(queue_offset=request.queue_id + 1)

    fake.hooks.update(
        DescribeTopic=describe,
        FetchOffsets=fetch,
        Pull=pull,
        CommitOffsets=commit,
        QueryOffsetByTime=by_time,
    )
    yield fake
    fake.stop()


def test_consumer_starts_at_committed_offsets_and_commits(server: FakeServer) -> None:
    with Consumer([server.address], "g", "t", max_messages=2) as consumer:
        assert consumer.positions == {0: 0, 1: 1}  # queue 1 committed at 1, queue 0 none
        bodies: list[bytes] = []
        for _ in range(5):
            bodies += [m.body for m in consumer.poll(0.05)]
        assert bodies == [b"a0", b"a1", b"a2"]
        assert consumer.commit() == 42
        assert consumer.commit() is None  # nothing changed since
    assert server.committed == {0: 3, 1: 1}  # type: ignore[attr-defined]


def test_consumer_from_beginning_and_seek(server: FakeServer) -> None:
    with Consumer([server.address], "g", "t", queue_ids=[1], from_beginning=True) as consumer:
        messages = consumer.poll(0.05)
        assert [m.body for m in messages] == [b"b0"]
        assert messages[0].born_host == "[::1]:5"
        assert messages[0].store_host == "127.0.0.1:7701"
        assert consumer.poll(0.05) == []
        consumer.seek(1, 0)
        assert [m.body for m in consumer.poll(0.05)] == [b"b0"]
        assert consumer.seek_to_time(123) == {1: 2}
        with pytest.raises(ValueError, match="does not read queue"):
            consumer.seek(0, 0)


def test_consumer_iteration_is_bounded(server: FakeServer) -> None:
    with Consumer([server.address], "g", "t", from_beginning=True) as consumer:
        seen = [m.body for m in consumer.iterate(max_idle_s=0.3, poll_timeout_s=0.1)]
    assert sorted(seen) == [b"a0", b"a1", b"a2", b"b0"]


def test_consumer_unknown_queue(server: FakeServer) -> None:
    with (
        Consumer([server.address], "g", "t", queue_ids=[7]) as consumer,
        pytest.raises(ValueError, match="no queue 7"),
    ):
        consumer.poll(0)


def test_admin_calls(server: FakeServer) -> None:
    server.hooks["CreateTopic"] = lambda request, context: client_pb2.CreateTopicResponse(
        topic=client_pb2.TopicInfo(name=request.topic, queue_count=request.queue_count),
        created=True,
    )
    server.hooks["ClusterStatus"] = lambda request, context: client_pb2.ClusterStatusResponse(
        cluster_id="c",
        node_id="n1",
        role=client_pb2.MEMBER_ROLE_LEADER,
        leader_id="n1",
        leader_address=server.address,
        term=3,
        members=[
            client_pb2.Member(
                node_id="n1",
                address=server.address,
                role=client_pb2.MEMBER_ROLE_LEADER,
                voter=True,
                replication_state=client_pb2.REPLICATION_STATE_REPLICATE,
            )
        ],
    )
    with Admin([server.address]) as admin:
        creation = admin.create_topic("t", 2)
        assert creation.created
        assert creation.topic.queue_count == 2
        status = admin.cluster_status()
        assert status.role == "leader"
        assert status.members[0].replication_state == "replicate"
        assert admin.connection.leader_address == server.address
        description = admin.describe_topic("t")
        assert [q.max_queue_offset for q in description.queues] == [3, 1]
        assert admin.query_by_time("t", 0, 5) == 1
