"""The client services' request limits (issue 16), each through a real gRPC server: a request
over a limit is refused before the write path, with INVALID_ARGUMENT (the request is too big)
or RESOURCE_EXHAUSTED (the node is full), and a message naming the limit's setting."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import cast

import grpc
import pytest

from raftlog.node.services.limits import InflightLimit, LimitReachedError, ServiceLimits
from raftlog.node.write_path import ProduceOutcome
from raftlog.proto import client_pb2
from raftlog.store.message_store import Message, MessageStore
from tests.unit.node.services.conftest import TOPIC, DispatchSignal, Harness, start_harness

Code = grpc.StatusCode

SMALL_LIMITS = ServiceLimits(
    long_poll_slice_ms=50,
    max_topic_queue_count=16,
    max_topic_count=2,
    max_produce_request_bytes=1024,
    max_produce_message_count=3,
    max_inflight_produce_count=1,
)


class BlockingProduce(DispatchSignal):
    """A write path whose produce waits until the test releases it."""

    def __init__(self, store: MessageStore) -> None:
        super().__init__(store)
        self.entered = threading.Event()
        self.release = threading.Event()

    def produce(self, messages: list[Message], **_: object) -> ProduceOutcome:
        self.entered.set()
        self.release.wait(10)
        return ProduceOutcome([], [], 0, duplicate=False, raft_index=0, raft_term=0)


@pytest.fixture
def small(store: MessageStore) -> Iterator[Harness]:
    started, server = start_harness(store, SMALL_LIMITS)
    try:
        yield started
    finally:
        started.services.stop()
        started.channel.close()
        server.stop(grace=None).wait()


def refused(method: object, request: object) -> grpc.Call:
    with pytest.raises(grpc.RpcError) as raised:
        method(request, timeout=5)  # type: ignore[operator]
    return cast(grpc.Call, raised.value)


def test_queues_per_topic(small: Harness) -> None:
    error = refused(
        small.admin.CreateTopic, client_pb2.CreateTopicRequest(topic="t", queue_count=17)
    )
    assert error.code() == Code.INVALID_ARGUMENT
    assert "max_topic_queue_count" in error.details() and "17" in error.details()


def test_topic_count(small: Harness) -> None:
    small.store.create_topic("second", 1)
    error = refused(
        small.admin.CreateTopic, client_pb2.CreateTopicRequest(topic="t", queue_count=1)
    )
    assert error.code() == Code.RESOURCE_EXHAUSTED
    assert "max_topic_count" in error.details()


def test_produce_request_bytes(small: Harness) -> None:
    request = client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage(queue_id=0, body=b"x" * 2000)]
    )
    error = refused(small.producer.Produce, request)
    assert error.code() == Code.INVALID_ARGUMENT
    assert "max_produce_request_bytes" in error.details()


def test_produce_message_count(small: Harness) -> None:
    request = client_pb2.ProduceRequest(
        topic=TOPIC, messages=[client_pb2.ProduceMessage(queue_id=0)] * 4
    )
    error = refused(small.producer.Produce, request)
    assert error.code() == Code.INVALID_ARGUMENT
    assert "max_produce_message_count" in error.details()


def test_inflight_produces_per_connection(store: MessageStore) -> None:
    """With one produce in flight on a connection, a second on the same connection is refused;
    another connection is not, and the slot frees once the first answers."""
    from raftlog.node.services.client_api import add_client_services
    from raftlog.proto import client_pb2_grpc

    write_path = BlockingProduce(store)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    add_client_services(server, store, write_path, SMALL_LIMITS)  # type: ignore[arg-type]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    first = grpc.insecure_channel(f"127.0.0.1:{port}")
    # Its own subchannel pool: a second connection, not a second channel over the first one.
    other = grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
    )
    request = client_pb2.ProduceRequest(topic=TOPIC, messages=[client_pb2.ProduceMessage()])
    try:
        stub = client_pb2_grpc.ProducerStub(first)  # type: ignore[no-untyped-call]
        pending = stub.Produce.future(request, timeout=10)
        assert write_path.entered.wait(5)
        error = refused(stub.Produce, request)
        assert error.code() == Code.RESOURCE_EXHAUSTED
        assert "max_inflight_produce_count" in error.details()
        write_path.entered.clear()
        other_stub = client_pb2_grpc.ProducerStub(other)  # type: ignore[no-untyped-call]
        second = other_stub.Produce.future(request, timeout=10)
        assert write_path.entered.wait(5)
        write_path.release.set()
        pending.result()
        second.result()
        stub.Produce(request, timeout=5)
    finally:
        write_path.release.set()
        first.close()
        other.close()
        server.stop(grace=None).wait()


def test_inflight_limit_counts_per_peer() -> None:
    limit = InflightLimit(2, "max_x", "calls")
    with (
        limit.admit("a"),
        limit.admit("a"),
        limit.admit("b"),
        pytest.raises(LimitReachedError, match="max_x"),
        limit.admit("a"),
    ):
        pass
    with limit.admit("a"), limit.admit("a"):
        pass
