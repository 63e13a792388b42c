"""The one mapping from the errors a request can meet to gRPC statuses (errors.proto).

Every client servicer method runs its body inside ``abort_on_error(context)``; no method has
its own try/except for errors, so an error type gets the same status from every RPC.

Rules this module keeps:
- Each error type maps to exactly one code (``status_for``), following errors.proto's table.
  A method may override a type only where the same store error means something else in its
  RPC (``READ_OVERRIDES``, and the per-method overrides the servicers pass), never ad hoc.
- A refused membership change is FAILED_PRECONDITION too, with a ``raftlog-refused`` trailer
  and never a NotLeader detail: that is how a client tells it from "not leader".
- Not leader with a known leader: FAILED_PRECONDITION, message "not leader; leader is <id> at
  <address>", a NotLeader detail packed in ``grpc-status-details-bin`` (an RpcStatus) and the
  address in the ``raftlog-leader`` trailing metadata. No leader known: UNAVAILABLE, no trailer.
- Unknown outcome of a write: DEADLINE_EXCEEDED whose message starts "unknown outcome".
- Anything else is INTERNAL with the error's text, logged with its traceback: a request never
  crashes the node, and the call always ends with a status (never hangs).
- ``abort_on_error`` blocks must not be nested: gRPC's ``abort`` raises a bare Exception that
  an outer block would turn into INTERNAL.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
from google.protobuf import any_pb2

from raftlog.node.errors import (
    InvalidRequestError,
    MembershipRefusedError,
    NotLeaderError,
    OverloadedError,
    SequenceForgottenError,
    SequenceGapError,
    ShuttingDownError,
    TransferFailedError,
    UnknownMemberError,
    UnknownOutcomeError,
)
from raftlog.node.services.limits import DeadlinePassedError, LimitReachedError
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

_LOGGER = logging.getLogger(__name__)

STATUS_DETAILS_KEY = "grpc-status-details-bin"
LEADER_METADATA_KEY = "raftlog-leader"
REFUSED_METADATA_KEY = "raftlog-refused"
UNKNOWN_OUTCOME_PREFIX = "unknown outcome"
# gRPC sends the status message in a header: keep an unexpected error's text bounded.
_MAX_DETAILS_CHARS = 2000

Code = grpc.StatusCode
ErrorCodes = Mapping[type[BaseException], Any]

# errors.proto's table. Looked up along the error's class hierarchy (most specific first).
_CODES: dict[type[BaseException], Any] = {
    # Malformed requests: retrying unchanged cannot succeed.
    InvalidRequestError: Code.INVALID_ARGUMENT,
    InvalidTopicError: Code.INVALID_ARGUMENT,
    BodyTooLargeError: Code.INVALID_ARGUMENT,
    PropertiesTooLargeError: Code.INVALID_ARGUMENT,
    InvalidOffsetError: Code.INVALID_ARGUMENT,
    InvalidMessageIdError: Code.INVALID_ARGUMENT,
    # A field of the wrong type or beyond its bytes (the node's own checks come first).
    InvalidArgumentError: Code.INVALID_ARGUMENT,
    # A pre-encoded Produce record that does not decode; on reads see READ_OVERRIDES.
    CorruptRecordError: Code.INVALID_ARGUMENT,
    UnknownTopicError: Code.NOT_FOUND,
    UnknownMemberError: Code.NOT_FOUND,
    # Negative queue ids never reach the store (wire.require_non_negative refuses them), so
    # the store's InvalidQueueIdError here means "not below the topic's queue count".
    InvalidQueueIdError: Code.NOT_FOUND,
    DiskFullError: Code.RESOURCE_EXHAUSTED,
    OverloadedError: Code.RESOURCE_EXHAUSTED,
    LimitReachedError: Code.RESOURCE_EXHAUSTED,
    StoreClosedError: Code.UNAVAILABLE,
    ShuttingDownError: Code.UNAVAILABLE,
    SequenceForgottenError: Code.ALREADY_EXISTS,
    SequenceGapError: Code.OUT_OF_RANGE,
    UnknownOutcomeError: Code.DEADLINE_EXCEEDED,
    # The store's SYNC_FLUSH timeout: written but not acknowledged, so an unknown outcome.
    TimeoutError: Code.DEADLINE_EXCEEDED,
    TransferFailedError: Code.DEADLINE_EXCEEDED,
    DeadlinePassedError: Code.DEADLINE_EXCEEDED,
}
_UNKNOWN_OUTCOMES = (UnknownOutcomeError, TimeoutError)

# On a read, bytes that do not decode are a corrupt byte on disk (errors.proto: INTERNAL), not
# a bad request.
READ_OVERRIDES: ErrorCodes = {CorruptRecordError: Code.INTERNAL}


@dataclass(frozen=True, slots=True)
class StatusAnswer:
    """The status a call ends with: code, message and trailing metadata."""

    code: Any  # grpc.StatusCode (grpc ships no type hints)
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...] = ()


def status_for(error: BaseException, overrides: ErrorCodes | None = None) -> StatusAnswer:
    """The status answering ``error``; ``overrides`` replace the table for some types."""
    if isinstance(error, NotLeaderError):
        return _not_leader_status(error)
    if isinstance(error, MembershipRefusedError):
        return StatusAnswer(
            Code.FAILED_PRECONDITION, str(error), ((REFUSED_METADATA_KEY, "precondition"),)
        )
    code = Code.INTERNAL
    for error_type in type(error).__mro__:
        if overrides is not None and error_type in overrides:
            code = overrides[error_type]
            break
        if error_type in _CODES:
            code = _CODES[error_type]
            break
    details = str(error) or type(error).__name__
    if isinstance(error, _UNKNOWN_OUTCOMES) and not details.startswith(UNKNOWN_OUTCOME_PREFIX):
        details = f"{UNKNOWN_OUTCOME_PREFIX}: {details}"
    if code == Code.INTERNAL:
        details = f"internal error: {type(error).__name__}: {details}"
    return StatusAnswer(code, details[:_MAX_DETAILS_CHARS])


def _not_leader_status(error: NotLeaderError) -> StatusAnswer:
    if error.leader_id is None:
        return StatusAnswer(Code.UNAVAILABLE, str(error))
    details = str(error)
    detail = any_pb2.Any()
    detail.Pack(
        errors_pb2.NotLeader(
            leader_id=error.leader_id,
            leader_address=error.leader_address or "",
            term=error.term,
        )
    )
    status = errors_pb2.RpcStatus(
        code=Code.FAILED_PRECONDITION.value[0], message=details, details=[detail]
    )
    metadata: list[tuple[str, str | bytes]] = [(STATUS_DETAILS_KEY, status.SerializeToString())]
    if error.leader_address:
        metadata.append((LEADER_METADATA_KEY, error.leader_address))
    return StatusAnswer(Code.FAILED_PRECONDITION, details, tuple(metadata))


class AbortOnError:
    """Context manager ending the call with ``status_for(error)`` when its body raises."""

    def __init__(self, context: grpc.ServicerContext, overrides: ErrorCodes | None) -> None:
        self._context = context
        self._overrides = overrides

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        error_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # BaseExceptions that are not Exceptions (KeyboardInterrupt, SystemExit) stop the
        # process, not a call: let them through.
        if error is None or not isinstance(error, Exception):
            return
        answer = status_for(error, self._overrides)
        if answer.code == Code.INTERNAL:
            _LOGGER.error("request failed: %s", answer.details, exc_info=error)
        if answer.trailing_metadata:
            self._context.set_trailing_metadata(answer.trailing_metadata)
        # Raises (gRPC ends the call with this status): the body's error is not re-raised.
        self._context.abort(answer.code, answer.details)


def abort_on_error(
    context: grpc.ServicerContext, *, overrides: ErrorCodes | None = None
) -> AbortOnError:
    """``with abort_on_error(context): ...`` around a servicer method's body."""
    return AbortOnError(context, overrides)
