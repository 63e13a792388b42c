"""Malformed requests (issue 16): INVALID_ARGUMENT, one log line at most per method and
interval, never a traceback; and Health/List answers."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from raftlog.node.services.client_api import add_client_services
from raftlog.node.services.health import NodeHealth
from raftlog.node.services.request_guard import RateLimitedLog, RequestGuard
from raftlog.store.message_store import MessageStore
from tests.unit.node.services.conftest import TEST_LIMITS, DispatchSignal

Code = grpc.StatusCode
GARBAGE = b"\xff\xff\xff\xff"


@pytest.fixture
def channel(store: MessageStore) -> Iterator[grpc.Channel]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), interceptors=(RequestGuard(),))
    services = add_client_services(server, store, DispatchSignal(store), TEST_LIMITS)  # type: ignore[arg-type]
    checker = NodeHealth()
    checker.set("raftlog.v1.Producer", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    reflection.enable_server_reflection((reflection.SERVICE_NAME,), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    opened = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield opened
    finally:
        opened.close()
        services.stop()
        server.stop(grace=None).wait()


def raw_unary(channel: grpc.Channel, method: str, payload: bytes) -> grpc.Call:
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as raised:
        call(payload, timeout=5)
    return raised.value  # type: ignore[return-value]


def test_malformed_unary_requests_are_invalid_argument_logged_once(
    channel: grpc.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for _ in range(5):
        for method in ("/raftlog.v1.Producer/Produce", "/raftlog.v1.Consumer/Pull"):
            error = raw_unary(channel, method, GARBAGE)
            assert error.code() == Code.INVALID_ARGUMENT
            assert "malformed request" in error.details()
    lines = [r for r in caplog.records if "malformed request" in r.getMessage()]
    assert len(lines) == 2
    assert all(r.exc_info is None for r in caplog.records)


def test_malformed_stream_request_is_invalid_argument(channel: grpc.Channel) -> None:
    method = f"/{reflection.SERVICE_NAME}/ServerReflectionInfo"
    call = channel.stream_stream(method, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as raised:
        list(call(iter([GARBAGE]), timeout=5))
    assert raised.value.code() == Code.INVALID_ARGUMENT  # type: ignore[attr-defined]


def test_health_list(channel: grpc.Channel) -> None:
    stub = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
    response = stub.List(health_pb2.HealthListRequest(), timeout=5)
    assert response.statuses["raftlog.v1.Producer"].status == health_pb2.HealthCheckResponse.SERVING
    assert "" in response.statuses


def test_rate_limited_log_counts_what_it_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    log = RateLimitedLog(logging.getLogger("t"), interval_s=0.0)
    assert log.warning("m", "one") and log.warning("m", "two")
    quiet = RateLimitedLog(logging.getLogger("t"), interval_s=3600)
    assert quiet.warning("m", "a") and not quiet.warning("m", "b") and quiet.warning("n", "c")
    assert [r.getMessage() for r in caplog.records] == ["m: one", "m: two", "m: a", "n: c"]
