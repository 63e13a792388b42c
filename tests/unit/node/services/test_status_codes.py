"""status_codes.py: every error's status code (errors.proto), the NotLeader redirect trailers
(decoded as a client would, over a real gRPC call), and INTERNAL for anything unexpected."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from raftlog.node.errors import (
    InvalidRequestError,
    NotLeaderError,
    OverloadedError,
    SequenceForgottenError,
    SequenceGapError,
    ShuttingDownError,
    TransferFailedError,
    UnknownOutcomeError,
)
from raftlog.node.services.limits import DeadlinePassedError
from raftlog.node.services.status_codes import (
    LEADER_METADATA_KEY,
    READ_OVERRIDES,
    STATUS_DETAILS_KEY,
    abort_on_error,
    status_for,
)
from raftlog.proto import errors_pb2
from raftlog.store.errors import (
    BodyTooLargeError,
    CorruptRecordError,
    DiskFullError,
    InvalidArgumentError,
    InvalidMessageIdError,
    InvalidOffsetError,
    InvalidQueueIdError,
    InvalidTopicError,
    PropertiesTooLargeError,
    StoreClosedError,
    UnknownTopicError,
)

Code = grpc.StatusCode


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InvalidTopicError("bad"), Code.INVALID_ARGUMENT),
        (BodyTooLargeError("big"), Code.INVALID_ARGUMENT),
        (PropertiesTooLargeError("big"), Code.INVALID_ARGUMENT),
        (InvalidOffsetError("neg"), Code.INVALID_ARGUMENT),
        (InvalidMessageIdError("hex"), Code.INVALID_ARGUMENT),
        (InvalidArgumentError("flag beyond 4 bytes"), Code.INVALID_ARGUMENT),
        (CorruptRecordError("magic"), Code.INVALID_ARGUMENT),
        (InvalidRequestError("empty"), Code.INVALID_ARGUMENT),
        (UnknownTopicError("nope"), Code.NOT_FOUND),
        (InvalidQueueIdError("queue 9 of 4"), Code.NOT_FOUND),
        (DiskFullError("full"), Code.RESOURCE_EXHAUSTED),
        (OverloadedError("busy"), Code.RESOURCE_EXHAUSTED),
        (StoreClosedError("closed"), Code.UNAVAILABLE),
        (ShuttingDownError("stopping"), Code.UNAVAILABLE),
        (NotLeaderError(None, None, 3), Code.UNAVAILABLE),
        (NotLeaderError("n2", "10.0.0.2:9876", 3), Code.FAILED_PRECONDITION),
        (SequenceForgottenError("old"), Code.ALREADY_EXISTS),
        (SequenceGapError("gap"), Code.OUT_OF_RANGE),
        (UnknownOutcomeError("no quorum"), Code.DEADLINE_EXCEEDED),
        (TransferFailedError("slow"), Code.DEADLINE_EXCEEDED),
        (DeadlinePassedError("late"), Code.DEADLINE_EXCEEDED),
        (TimeoutError("not flushed"), Code.DEADLINE_EXCEEDED),
        (ValueError("bug"), Code.INTERNAL),
        (KeyError("bug"), Code.INTERNAL),
        (RuntimeError(), Code.INTERNAL),
    ],
)
def test_status_codes(error: Exception, code: grpc.StatusCode) -> None:
    answer = status_for(error)
    assert answer.code == code
    assert answer.details


def test_unknown_outcome_message_starts_with_unknown_outcome() -> None:
    for error in (UnknownOutcomeError("the batch may still commit"), TimeoutError("flush")):
        assert status_for(error).details.startswith("unknown outcome")


def test_internal_names_the_error() -> None:
    details = status_for(KeyError("missing")).details
    assert "KeyError" in details
    assert "missing" in details


def test_overrides_replace_the_table_for_one_type() -> None:
    assert status_for(CorruptRecordError("disk"), READ_OVERRIDES).code == Code.INTERNAL
    assert status_for(UnknownTopicError("x"), READ_OVERRIDES).code == Code.NOT_FOUND


def test_not_leader_trailers() -> None:
    answer = status_for(NotLeaderError("n2", "10.0.0.2:9876", 7))
    assert answer.details == "not leader; leader is n2 at 10.0.0.2:9876"
    metadata = dict(answer.trailing_metadata)
    assert metadata[LEADER_METADATA_KEY] == "10.0.0.2:9876"
    status = errors_pb2.RpcStatus.FromString(metadata[STATUS_DETAILS_KEY])
    assert status.code == Code.FAILED_PRECONDITION.value[0]
    assert status.message == answer.details
    (detail,) = status.details
    assert detail.type_url == "type.googleapis.com/raftlog.v1.NotLeader"
    not_leader = errors_pb2.NotLeader()
    assert detail.Unpack(not_leader)
    assert (not_leader.leader_id, not_leader.leader_address, not_leader.term) == (
        "n2",
        "10.0.0.2:9876",
        7,
    )


def test_no_leader_has_no_trailers() -> None:
    assert status_for(NotLeaderError(None, None, 1)).trailing_metadata == ()


# ---------------------------------------------------------------------- over a real call


def _raising(error: Exception) -> Callable[[bytes, Any], bytes]:
    def handler(request: bytes, context: grpc.ServicerContext) -> bytes:
        with abort_on_error(context):
            raise error
        return b""  # pragma: no cover (the block always aborts here)

    return handler


@pytest.fixture
def call() -> Iterator[Callable[[Exception], grpc.RpcError]]:
    """Runs a raising handler inside abort_on_error on a real server; returns the client's
    error."""
    errors: dict[str, Exception] = {}

    class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
        def service(self, details: Any) -> grpc.RpcMethodHandler | None:
            return grpc.unary_unary_rpc_method_handler(_raising(errors["next"]))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((Handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    method = channel.unary_unary("/test.Errors/Raise")

    def invoke(error: Exception) -> grpc.RpcError:
        errors["next"] = error
        with pytest.raises(grpc.RpcError) as raised:
            method(b"", timeout=5)
        return raised.value

    yield invoke
    channel.close()
    server.stop(grace=None).wait()


def test_not_leader_over_grpc(call: Callable[[Exception], grpc.RpcError]) -> None:
    error = call(NotLeaderError("n3", "[::1]:7000", 12))
    assert error.code() == Code.FAILED_PRECONDITION
    assert error.details() == "not leader; leader is n3 at [::1]:7000"
    trailers = dict(error.trailing_metadata())
    assert trailers[LEADER_METADATA_KEY] == "[::1]:7000"
    status = errors_pb2.RpcStatus.FromString(trailers[STATUS_DETAILS_KEY])
    not_leader = errors_pb2.NotLeader()
    assert status.details[0].Unpack(not_leader)
    assert (not_leader.leader_id, not_leader.term) == ("n3", 12)


def test_no_leader_over_grpc(call: Callable[[Exception], grpc.RpcError]) -> None:
    error = call(NotLeaderError(None, None, 2))
    assert error.code() == Code.UNAVAILABLE
    keys = {key for key, _ in error.trailing_metadata()}
    assert LEADER_METADATA_KEY not in keys
    assert STATUS_DETAILS_KEY not in keys


def test_unexpected_error_is_internal_and_logged(
    call: Callable[[Exception], grpc.RpcError], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="raftlog.node.services.status_codes"):
        error = call(ZeroDivisionError("division by zero"))
    assert error.code() == Code.INTERNAL
    assert "ZeroDivisionError" in error.details()
    (record,) = caplog.records
    assert record.exc_info is not None


def test_unknown_outcome_over_grpc(call: Callable[[Exception], grpc.RpcError]) -> None:
    error = call(UnknownOutcomeError("leadership lost after proposing"))
    assert error.code() == Code.DEADLINE_EXCEEDED
    assert error.details().startswith("unknown outcome")
