"""Mapping grpc.RpcError to the client's errors, with real gRPC statuses from a real server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from raftlog.client import errors as e
from raftlog.proto import client_pb2, client_pb2_grpc
from tests.unit.client.fake_server import FakeServer, abort_with, not_leader_trailers


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer().start()
    yield fake
    fake.stop()


def rpc_error(server: FakeServer, timeout_s: float = 5.0) -> grpc.RpcError:
    with grpc.insecure_channel(server.address) as channel:
        stub = client_pb2_grpc.AdminStub(channel)
        try:
            stub.ListTopics(client_pb2.ListTopicsRequest(), timeout=timeout_s)
        except grpc.RpcError as error:
            return error
    raise AssertionError("the call did not fail")


@pytest.mark.parametrize(
    ("code", "write", "expected"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, True, e.InvalidArgumentError),
        (grpc.StatusCode.NOT_FOUND, False, e.NotFoundError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, True, e.ResourceExhaustedError),
        (grpc.StatusCode.ALREADY_EXISTS, True, e.SequenceForgottenError),
        (grpc.StatusCode.OUT_OF_RANGE, True, e.SequenceGapError),
        (grpc.StatusCode.UNAVAILABLE, True, e.UnavailableError),
        (grpc.StatusCode.UNAVAILABLE, False, e.UnavailableError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, True, e.UnknownOutcomeError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, False, e.DeadlineExceededError),
        (grpc.StatusCode.CANCELLED, True, e.UnknownOutcomeError),
        (grpc.StatusCode.INTERNAL, True, e.InternalError),
        (grpc.StatusCode.FAILED_PRECONDITION, True, e.NotLeaderError),
        (grpc.StatusCode.UNAUTHENTICATED, True, e.UnauthenticatedError),
        (grpc.StatusCode.PERMISSION_DENIED, True, e.PermissionDeniedError),
    ],
)
def test_status_codes(
    server: FakeServer, code: grpc.StatusCode, write: bool, expected: type
) -> None:
    server.hooks["ListTopics"] = abort_with(code, "told so")
    error = e.from_rpc_error(rpc_error(server), write=write, address=server.address)
    assert type(error) is expected
    assert error.code == code
    assert error.address == server.address
    assert "told so" in str(error)


def test_not_leader_reads_trailer_and_detail(server: FakeServer) -> None:
    server.hooks["ListTopics"] = abort_with(
        grpc.StatusCode.FAILED_PRECONDITION,
        "not leader; leader is n9 at 10.1.1.1:7702",
        not_leader_trailers("10.1.1.1:7702", term=7),
    )
    error = e.from_rpc_error(rpc_error(server), write=True)
    assert isinstance(error, e.NotLeaderError)
    assert error.leader_address == "10.1.1.1:7702"
    assert error.leader_id == "n9"
    assert error.term == 7


def test_not_leader_without_trailer(server: FakeServer) -> None:
    server.hooks["ListTopics"] = abort_with(grpc.StatusCode.FAILED_PRECONDITION, "not leader")
    error = e.from_rpc_error(rpc_error(server), write=True)
    assert isinstance(error, e.NotLeaderError)
    assert error.leader_address is None


def test_trailer_alone_is_enough(server: FakeServer) -> None:
    server.hooks["ListTopics"] = abort_with(
        grpc.StatusCode.FAILED_PRECONDITION, "not leader", (("raftlog-leader", "h:1"),)
    )
    error = e.from_rpc_error(rpc_error(server), write=False)
    assert isinstance(error, e.NotLeaderError)
    assert error.leader_address == "h:1"
    assert error.term == 0


def test_client_deadline_is_unknown_outcome_for_writes(server: FakeServer) -> None:
    server.hooks["ListTopics"] = lambda request, context: (
        time.sleep(1.0),
        client_pb2.ListTopicsResponse(),
    )[1]
    error = rpc_error(server, timeout_s=0.1)
    assert isinstance(e.from_rpc_error(error, write=True), e.UnknownOutcomeError)
    assert isinstance(e.from_rpc_error(error, write=False), e.DeadlineExceededError)


def test_connection_refused_is_unavailable_even_for_writes() -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    with grpc.insecure_channel(address) as channel:
        stub = client_pb2_grpc.AdminStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.ListTopics(client_pb2.ListTopicsRequest(), timeout=2)
    error = e.from_rpc_error(caught.value, write=True)
    assert type(error) is e.UnavailableError


def test_connection_broken_mid_call_is_unknown_outcome_for_writes() -> None:
    fake = FakeServer().start()
    entered = threading.Event()

    def slow(request: Any, context: Any) -> Any:
        entered.set()
        time.sleep(3)
        return client_pb2.ListTopicsResponse()

    fake.hooks["ListTopics"] = slow
    threading.Thread(target=lambda: (entered.wait(5), fake.stop()), daemon=True).start()
    error = rpc_error(fake, timeout_s=10)
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert isinstance(e.from_rpc_error(error, write=True), e.UnknownOutcomeError)
    assert isinstance(e.from_rpc_error(error, write=False), e.UnavailableError)


def test_oversize_resource_exhausted_is_not_retryable() -> None:
    fake = FakeServer().start()
    fake.hooks["ListTopics"] = lambda request, context: client_pb2.ListTopicsResponse(
        topics=[client_pb2.TopicInfo(name="t" * 100, queue_count=1)] * 200
    )
    try:
        options = [("grpc.max_receive_message_length", 1000)]
        with grpc.insecure_channel(fake.address, options=options) as channel:
            stub = client_pb2_grpc.AdminStub(channel)
            with pytest.raises(grpc.RpcError) as caught:
                stub.ListTopics(client_pb2.ListTopicsRequest(), timeout=5)
    finally:
        fake.stop()
    error = e.from_rpc_error(caught.value, write=False)
    assert isinstance(error, e.ResourceExhaustedError)
    assert not error.retryable
