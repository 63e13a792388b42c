"""The client's errors, one class per answer a caller must tell apart, and the mapping from
``grpc.RpcError`` (status code, message, ``raftlog-leader`` trailer, NotLeader detail).

Rules this module keeps (proto/raftlog/v1/errors.proto is the contract):
- FAILED_PRECONDITION is "not leader" (NotLeaderError, carrying the leader's address from the
  ``raftlog-leader`` trailer or the NotLeader detail when known), except with a
  ``raftlog-refused`` trailer: a refused membership change (PreconditionFailedError), never
  retried or redirected.
- A write whose request may have reached the server and whose answer is lost (DEADLINE_EXCEEDED,
  CANCELLED, or a connection that broke mid-call) is UnknownOutcomeError, never a failure.
- UNAVAILABLE sent by the server (no leader, shutting down) and a connection that was never
  established both mean "nothing written": UnavailableError. The two client-side cases are told
  apart by gRPC's status text (see ``_CONNECTION_BROKEN``); anything else with UNAVAILABLE is
  taken as the server's answer.
"""

from __future__ import annotations

from typing import Any

import grpc

from raftlog.proto import errors_pb2

LEADER_TRAILER = "raftlog-leader"
REFUSED_TRAILER = "raftlog-refused"
_DETAILS_TRAILER = "grpc-status-details-bin"
_NOT_LEADER_TYPE = "raftlog.v1.NotLeader"

# gRPC's own texts for a call that broke after the request may have been sent (observed
# from grpcio: "Stream removed (Socket closed)", "Connection reset by peer", and the server's
# own "Cancelling all calls" when it stops with calls in flight).
_CONNECTION_BROKEN = (
    "cancelling all calls",
    "socket closed",
    "stream removed",
    "connection reset",
    "broken pipe",
    "goaway",
    "rst_stream",
    "keepalive",
    "transport closed",
    "connection aborted",
    "end of stream",
)
# gRPC's texts for a request that never left the client (no connection could be made).
_NEVER_SENT = (
    "failed to connect to all addresses",
    "connections to all backends failing",
    "dns resolution failed",
    "connection refused",
    "name resolution",
)


class RaftlogError(Exception):
    """Base of every error the client raises. ``code`` is the gRPC status code (None when the
    client decided on its own), ``address`` the member that answered (when known)."""

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        address: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.address = address


class NotLeaderError(RaftlogError):
    """The member is not the leader (FAILED_PRECONDITION). Nothing was written; retry at
    ``leader_address`` (None when the member did not name one)."""

    def __init__(
        self,
        message: str,
        *,
        leader_address: str | None,
        leader_id: str | None = None,
        term: int = 0,
        code: grpc.StatusCode | None = None,
        address: str | None = None,
    ) -> None:
        super().__init__(message, code=code, address=address)
        self.leader_address = leader_address
        self.leader_id = leader_id
        self.term = term


class PreconditionFailedError(RaftlogError):
    """The cluster's state does not allow the operation now (a membership change: another one
    pending, a learner not caught up, a quorum that would be lost, already a member). Nothing
    changed; the message says what would make it possible."""


class UnavailableError(RaftlogError):
    """No leader right now, the member is shutting down or recovering, or no connection could
    be made. Nothing was written; retry with backoff, possibly at another member."""


class UnknownOutcomeError(RaftlogError):
    """A write's answer was lost (deadline, cancellation, or a broken connection after the
    request may have been sent): it may or may not be stored, and may still commit. Never
    report it as failed; the idempotent producer resends it safely."""


class DeadlineExceededError(RaftlogError):
    """A read did not finish in time (nothing changed)."""


class InvalidArgumentError(RaftlogError):
    """The request is wrong; resending it unchanged cannot succeed. Nothing was written."""


class NotFoundError(RaftlogError):
    """Unknown topic, queue id out of range, or no message at that id. Nothing was written."""


class ResourceExhaustedError(RaftlogError):
    """The member refuses for lack of a resource (disk full, too much in flight): nothing was
    written; back off and retry. ``retryable`` is False when gRPC itself refused a message
    over the channel's size limit (retrying cannot help)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        code: grpc.StatusCode | None = None,
        address: str | None = None,
    ) -> None:
        super().__init__(message, code=code, address=address)
        self.retryable = retryable


class SequenceForgottenError(RaftlogError):
    """Idempotent produce (ALREADY_EXISTS): the batch WAS stored, exactly once, but the server
    no longer remembers its offsets."""


class SequenceGapError(RaftlogError):
    """Idempotent produce (OUT_OF_RANGE): an earlier batch of this producer is missing; nothing
    was written. Resend the earlier batches first, in order."""


class UnauthenticatedError(RaftlogError):
    """The member cannot tell who the client is (UNAUTHENTICATED: no token or certificate, or
    an unknown one). Nothing was written; fix the credentials."""


class PermissionDeniedError(RaftlogError):
    """The client is known but no access rule lets it do this (PERMISSION_DENIED). Nothing was
    written; an operator grants it with `raftlog acl grant`."""


class InternalError(RaftlogError):
    """A server bug or corruption found on disk (INTERNAL, UNKNOWN, DATA_LOSS...)."""


def _metadata(call: Any) -> dict[str, Any]:
    getter = getattr(call, "trailing_metadata", None)
    pairs = getter() if callable(getter) else None
    return {key: value for key, value in (pairs or ())}


def _not_leader_detail(raw: object) -> Any | None:
    """The NotLeader packed in a ``grpc-status-details-bin`` trailer, or None."""
    if not isinstance(raw, bytes):
        return None
    try:
        status = errors_pb2.RpcStatus.FromString(raw)
        for detail in status.details:
            if detail.type_url.rsplit("/", 1)[-1] == _NOT_LEADER_TYPE:
                return errors_pb2.NotLeader.FromString(detail.value)
    except Exception:  # a malformed detail must not hide the status itself
        return None
    return None


def from_rpc_error(
    error: grpc.RpcError, *, write: bool, address: str | None = None
) -> RaftlogError:
    """Map a failed call to the RaftlogError a caller acts on.

    ``write`` says whether the call changes state (Produce, CommitOffsets, CreateTopic,
    TransferLeadership): only then can a lost answer be an unknown outcome. ``address`` is
    the member the call went to.
    """
    code_getter = getattr(error, "code", None)
    code = code_getter() if callable(code_getter) else grpc.StatusCode.UNKNOWN
    details_getter = getattr(error, "details", None)
    details = (details_getter() if callable(details_getter) else None) or str(code)
    where = f" ({address})" if address else ""
    text = f"{details}{where}"
    lowered = details.lower()
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        trailers = _metadata(error)
        detail = _not_leader_detail(trailers.get(_DETAILS_TRAILER))
        leader = trailers.get(LEADER_TRAILER) or (detail.leader_address if detail else "")
        if REFUSED_TRAILER in trailers:
            return PreconditionFailedError(text, code=code, address=address)
        return NotLeaderError(
            text,
            leader_address=str(leader) or None,
            leader_id=(detail.leader_id or None) if detail else None,
            term=detail.term if detail else 0,
            code=code,
            address=address,
        )
    if code == grpc.StatusCode.UNAVAILABLE:
        broken = any(marker in lowered for marker in _CONNECTION_BROKEN)
        never_sent = any(marker in lowered for marker in _NEVER_SENT)
        if write and broken and not never_sent:
            return UnknownOutcomeError(
                f"connection lost after the write may have been sent; it may or may not be "
                f"stored: {text}",
                code=code,
                address=address,
            )
        return UnavailableError(text, code=code, address=address)
    if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
        if write:
            return UnknownOutcomeError(
                f"no answer in time; the write may or may not be stored: {text}",
                code=code,
                address=address,
            )
        return DeadlineExceededError(text, code=code, address=address)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgumentError(text, code=code, address=address)
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(text, code=code, address=address)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        # gRPC's own size-limit refusal reads "Received message larger than max (...)".
        oversize = "larger than max" in lowered
        return ResourceExhaustedError(text, retryable=not oversize, code=code, address=address)
    if code == grpc.StatusCode.ALREADY_EXISTS:
        return SequenceForgottenError(
            f"the batch was stored exactly once, but its offsets are forgotten: {text}",
            code=code,
            address=address,
        )
    if code == grpc.StatusCode.OUT_OF_RANGE:
        return SequenceGapError(text, code=code, address=address)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return UnauthenticatedError(text, code=code, address=address)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDeniedError(text, code=code, address=address)
    return InternalError(f"{code.name}: {text}", code=code, address=address)
