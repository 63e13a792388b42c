"""The push consumer (client/push_consumer.py) against a scripted server: every message
reaches the listener, commits stop at the lowest message still in the listener, a queue's
window is bounded, RECONSUME_LATER and listener exceptions consume the message again (via
``reconsume_later`` when the consumer has it), exceptions are logged rate-limited."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from raftlog.client import ConsumeResult, Message, PushConsumer
from raftlog.proto import client_pb2
from tests.unit.client.fake_server import FakeServer

QUEUE_LENGTHS = {0: 40, 1: 40}
WAIT_S = 10.0


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer().start()
    committed: dict[int, int] = {}
    fake.committed = committed  # type: ignore[attr-defined]

    def describe(request: Any, context: Any) -> Any:
        return client_pb2.DescribeTopicResponse(
            topic=client_pb2.TopicInfo(name=request.topic, queue_count=len(QUEUE_LENGTHS)),
            queues=[
                client_pb2.QueueInfo(queue_id=q, max_queue_offset=n)
                for q, n in QUEUE_LENGTHS.items()
            ],
        )

    def pull(request: Any, context: Any) -> Any:
        end = QUEUE_LENGTHS[request.queue_id]
        chosen = range(request.queue_offset, min(end, request.queue_offset + request.max_messages))
        if not chosen:
            time.sleep(min(request.long_poll_timeout_ms / 1000, 0.05))
        return client_pb2.PullResponse(
            status=client_pb2.PULL_STATUS_FOUND
            if chosen
            else client_pb2.PULL_STATUS_NO_NEW_MESSAGES,
            messages=[
                client_pb2.StoredMessage(
                    topic=request.topic,
                    queue_id=request.queue_id,
                    queue_offset=o,
                    body=b"%d-%d" % (request.queue_id, o),
                )
                for o in chosen
            ],
            next_queue_offset=request.queue_offset + len(chosen),
            max_queue_offset=end,
        )

    def fetch(request: Any, context: Any) -> Any:
        return client_pb2.FetchOffsetsResponse()

    def commit(request: Any, context: Any) -> Any:
        for offset in request.offsets:
            committed[offset.queue_id] = offset.queue_offset
        return client_pb2.CommitOffsetsResponse(raft_index=1)

    fake.hooks.update(DescribeTopic=describe, Pull=pull, FetchOffsets=fetch, CommitOffsets=commit)
    yield fake
    fake.stop()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def push(server: FakeServer, listener: Callable[[Message], Any], **kwargs: Any) -> PushConsumer:
    settings: dict[str, Any] = {"pull_batch_size": 4, "commit_interval_s": 0.05, **kwargs}
    return PushConsumer([server.address], group="g", topic="t", listener=listener, **settings)


def test_every_message_reaches_the_listener_and_is_committed(server: FakeServer) -> None:
    seen: list[bytes] = []
    lock = threading.Lock()

    def listener(message: Message) -> ConsumeResult:
        with lock:
            seen.append(message.body)
        return ConsumeResult.CONSUME_SUCCESS

    with push(server, listener, consume_thread_count=3):
        wait_until(lambda: len(seen) == 80, "every message")
    assert sorted(seen) == sorted(b"%d-%d" % (q, o) for q in (0, 1) for o in range(40))
    assert server.committed == {0: 40, 1: 40}  # type: ignore[attr-defined]


def test_a_slow_message_holds_its_queue_s_commit_and_the_window_is_bounded(
    server: FakeServer,
) -> None:
    release = threading.Event()
    seen: set[tuple[int, int]] = set()

    def listener(message: Message) -> ConsumeResult:
        seen.add((message.queue_id, message.queue_offset))
        if (message.queue_id, message.queue_offset) == (0, 5):
            release.wait(WAIT_S)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = push(server, listener, consume_thread_count=2, max_in_flight_per_queue=12)
    with consumer:
        wait_until(lambda: len([s for s in seen if s[0] == 1]) == 40, "queue 1")
        time.sleep(0.3)
        # Queue 0 stops at its window: at most offsets 5..16 (12 messages) pulled, in
        # batches of 4, so at least up to 13.
        assert 13 <= max(o for q, o in seen if q == 0) <= 16
        assert server.committed == {0: 5, 1: 40}  # type: ignore[attr-defined]
        release.set()
        wait_until(lambda: len(seen) == 80, "queue 0 after the slow message")
        wait_until(lambda: server.committed == {0: 40, 1: 40}, "the final commit")  # type: ignore[attr-defined]


def test_reconsume_later_and_exceptions_consume_again_locally(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: dict[tuple[int, int], int] = {}
    lock = threading.Lock()

    def listener(message: Message) -> ConsumeResult:
        key = (message.queue_id, message.queue_offset)
        with lock:
            attempts[key] = attempts.get(key, 0) + 1
            count = attempts[key]
        if key[1] % 10 == 3 and count == 1:
            raise RuntimeError("boom")
        if key[1] % 10 == 4 and count == 1:
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.CONSUME_SUCCESS

    with caplog.at_level(logging.WARNING), push(server, listener, redelivery_delay_s=0.05):
        wait_until(lambda: len(attempts) == 80 and sum(attempts.values()) == 96, "retries")
        wait_until(lambda: server.committed == {0: 40, 1: 40}, "the commit")  # type: ignore[attr-defined]
    assert all(n == (2 if o % 10 in (3, 4) else 1) for (_, o), n in attempts.items())
    raised = [r for r in caplog.records if "listener raised" in r.getMessage()]
    assert len(raised) == 1 and raised[0].exc_info is not None  # rate-limited: once


def test_reconsume_later_goes_to_the_consumer_when_it_has_it(server: FakeServer) -> None:
    sent_back: list[int] = []

    def listener(message: Message) -> ConsumeResult:
        return ConsumeResult.RECONSUME_LATER if message.queue_offset == 7 else None  # type: ignore[return-value]

    consumer = push(server, listener)
    consumer.consumer.reconsume_later = lambda m: sent_back.append(m.queue_offset)  # type: ignore[attr-defined]
    with consumer:
        # None is not a ConsumeResult: taken as RECONSUME_LATER too, so every message goes back.
        wait_until(lambda: len(sent_back) == 80, "every message sent back")
        wait_until(lambda: server.committed == {0: 40, 1: 40}, "the commit")  # type: ignore[attr-defined]


def test_bad_settings_and_life_cycle(server: FakeServer) -> None:
    def listener(message: Message) -> ConsumeResult:
        return ConsumeResult.CONSUME_SUCCESS

    with pytest.raises(ValueError, match="consume_thread_count"):
        push(server, listener, consume_thread_count=0)
    with pytest.raises(ValueError, match="max_in_flight_per_queue"):
        push(server, listener, max_in_flight_per_queue=2)
    with pytest.raises(ValueError, match="empty tag"):
        push(server, listener, tags="a ||")
    with pytest.raises(TypeError, match="callable"):
        push(server, "not a function")  # type: ignore[arg-type]
    consumer = push(server, listener).start()
    with pytest.raises(RuntimeError, match="starts once"):
        consumer.start()
    consumer.shutdown()
    consumer.shutdown()  # idempotent
    push(server, listener).shutdown()  # never started: closes
