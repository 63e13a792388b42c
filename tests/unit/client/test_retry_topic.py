"""The consumer's retry topic against a scripted server: retried messages come back with
their first topic, ``reconsume_later`` sends what the server needs (idempotently: one
producer id per thread, a fresh one after a failure), and commits cover the retry topic."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from raftlog.client import Consumer, Message, RaftlogError
from raftlog.proto import client_pb2
from tests.unit.client.fake_server import FakeServer

# topic -> queue 0's messages (body, properties, reconsume_times)
TOPICS: dict[str, list[tuple[bytes, dict[str, str], int]]] = {
    "orders": [(b"o0", {}, 0), (b"o1", {}, 0)],
    "%RETRY%g": [(b"r0", {"RETRY_TOPIC": "orders", "ORIGIN_MESSAGE_ID": "X"}, 1)],
}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer().start()
    fake.retry_topics = True
    committed: list[tuple[str, int, int]] = []
    sent_back: list[Any] = []
    fake.committed = committed  # type: ignore[attr-defined]
    fake.sent_back = sent_back  # type: ignore[attr-defined]

    def describe(request: Any, context: Any) -> Any:
        return client_pb2.DescribeTopicResponse(
            topic=client_pb2.TopicInfo(name=request.topic, queue_count=1),
            queues=[client_pb2.QueueInfo(queue_id=0, max_queue_offset=len(TOPICS[request.topic]))],
        )

    def pull(request: Any, context: Any) -> Any:
        rows = TOPICS[request.topic][request.queue_offset :][: request.max_messages]
        if not rows:
            time.sleep(min(request.long_poll_timeout_ms / 1000, 0.02))
        return client_pb2.PullResponse(
            status=client_pb2.PULL_STATUS_FOUND if rows else client_pb2.PULL_STATUS_NO_NEW_MESSAGES,
            messages=[
                client_pb2.StoredMessage(
                    topic=request.topic,
                    queue_id=0,
                    queue_offset=request.queue_offset + i,
                    msg_id=f"{request.topic}-{request.queue_offset + i}",
                    body=body,
                    reconsume_times=times,
                    properties=[client_pb2.Property(name=k, value=v) for k, v in props.items()],
                )
                for i, (body, props, times) in enumerate(rows)
            ],
            next_queue_offset=request.queue_offset + len(rows),
            max_queue_offset=len(TOPICS[request.topic]),
        )

    def commit(request: Any, context: Any) -> Any:
        committed.extend((o.topic, o.queue_id, o.queue_offset) for o in request.offsets)
        return client_pb2.CommitOffsetsResponse(raft_index=len(committed))

    def send_back(request: Any, context: Any) -> Any:
        sent_back.append(request)
        if [r.msg_id for r in sent_back].count("orders-1") == 1 == (request.msg_id == "orders-1"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "refused once")
        return client_pb2.SendBackResponse(
            topic="%RETRY%g",
            reconsume_times=2,
            result=client_pb2.ProduceResult(msg_id="COPY"),
        )

    fake.hooks.update(
        DescribeTopic=describe,
        Pull=pull,
        FetchOffsets=lambda r, c: client_pb2.FetchOffsetsResponse(),
        CommitOffsets=commit,
        SendBack=send_back,
    )
    yield fake
    fake.stop()


def poll_all(consumer: Consumer, count: int) -> list[Message]:
    found: list[Message] = []
    deadline = time.monotonic() + 5
    while len(found) < count and time.monotonic() < deadline:
        found += consumer.poll(0.1)
    return found


def test_retried_messages_come_back_with_their_first_topic(server: FakeServer) -> None:
    with Consumer([server.address], "g", "orders") as consumer:
        messages = poll_all(consumer, 3)
        assert sorted(m.body for m in messages) == [b"o0", b"o1", b"r0"]
        [retried] = [m for m in messages if m.body == b"r0"]
        assert (retried.topic, retried.pulled_topic, retried.reconsume_times) == (
            "orders",
            "%RETRY%g",
            1,
        )
        assert all(m.pulled_topic == "" for m in messages if m.body != b"r0")
        consumer.commit()
    assert sorted(server.committed) == [("%RETRY%g", 0, 1), ("orders", 0, 2)]  # type: ignore[attr-defined]


def test_reconsume_later_names_where_the_message_was_pulled(server: FakeServer) -> None:
    with Consumer([server.address], "g", "orders", max_reconsume_times=3) as consumer:
        messages = {m.body: m for m in poll_all(consumer, 3)}
        result = consumer.reconsume_later(messages[b"r0"])
        assert (result.topic, result.reconsume_times, result.msg_id) == ("%RETRY%g", 2, "COPY")
        with pytest.raises(RaftlogError, match="refused once"):
            consumer.reconsume_later(messages[b"o1"])
        consumer.reconsume_later(messages[b"o1"])
    first, refused, again = server.sent_back  # type: ignore[attr-defined]
    assert (first.group, first.topic, first.msg_id) == ("g", "%RETRY%g", "%RETRY%g-0")
    assert (first.max_reconsume_times, first.sequence) == (3, 1)
    assert (refused.topic, refused.msg_id, refused.sequence) == ("orders", "orders-1", 2)
    # After a failure this thread starts a fresh producer id: no sequence gap.
    assert again.producer_id != refused.producer_id and again.sequence == 1


def test_broadcast_has_no_retry_topic(server: FakeServer, tmp_path: Any) -> None:
    with Consumer(
        [server.address], "g", "orders", broadcast=True, offsets_dir=tmp_path
    ) as consumer:
        messages = poll_all(consumer, 2)
        assert sorted(m.body for m in messages) == [b"o0", b"o1"]
        with pytest.raises(ValueError, match="broadcast"):
            consumer.reconsume_later(messages[0])
