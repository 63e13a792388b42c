"""The Producer service's transactional calls (client.proto; docs/messaging.md "Transactions"):
a Produce with ``transaction_group`` (the half message), EndTransaction, and the
TransactionChecks stream. Deciding and checking back are the replication mode's
(node/transaction_path.py); what is here checks requests, converts, and streams.

Rules this module keeps:
- Stateless checks first (wire.py): group, topic, client id, transaction id, message id,
  resolution; a bad one is INVALID_ARGUMENT and nothing is written.
- Raft mode only: a node without a TransactionPath (master-slave) refuses all three with
  INVALID_ARGUMENT rather than store a half that nothing would ever decide.
- A half message is one message with a uniq_key (the transaction id), no delay; its real
  topic and queue are checked like a produce's before it is stored, so a commit can always
  write it. It is written through the write path like any produce (idempotent, atomic).
- A check stream is served by the leader only: elsewhere it ends at once with "not leader",
  and it ends the same way as soon as this member stops leading (or UNAVAILABLE when the
  node stops), so the producer reopens it where the checks come from. Its first message is
  an empty TransactionCheck: registered. Each stream is detached when its call ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from raftlog.node.errors import InvalidRequestError, NotLeaderError, ShuttingDownError
from raftlog.node.messaging.transaction import HALF_PROPERTIES, to_half
from raftlog.node.messaging.transaction_checkers import CheckRequest
from raftlog.node.services.delayed_produce import wants_delay
from raftlog.node.services.group_coordinator import CLIENT_ID_PATTERN
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.services.status_codes import READ_OVERRIDES, ErrorCodes, abort_on_error
from raftlog.node.services.wire import (
    physical_offset_of_message_id,
    produce_response,
    require_client_topic,
    require_group_name,
    require_topic_name,
    stored_message,
)
from raftlog.node.transaction_path import EndTransaction, TransactionPath
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2
from raftlog.store.errors import InvalidMessageIdError, InvalidQueueIdError
from raftlog.store.message_store import Message

MAX_CHECK_TOPICS = 64
# EndTransaction reads the half by its id (checked for form first): an id naming no record is
# NOT_FOUND, as for a query.
END_TRANSACTION_OVERRIDES: ErrorCodes = {
    **READ_OVERRIDES,
    InvalidMessageIdError: grpc.StatusCode.NOT_FOUND,
}
# How often an idle check stream looks whether this member still leads.
_CHECK_POLL_S = 0.5
_RESOLUTIONS = {
    client_pb2.TRANSACTION_RESOLUTION_COMMIT: True,
    client_pb2.TRANSACTION_RESOLUTION_ROLLBACK: False,
}


class TransactionCalls:
    """Serves the transactional calls over one write path and TransactionPath."""

    def __init__(
        self, write_path: WritePath, limits: ServiceLimits, transactions: TransactionPath | None
    ) -> None:
        self._write_path = write_path
        self._limits = limits
        self._transactions = transactions
        self._stopped = threading.Event()

    def stop(self) -> None:
        """End every check stream (the node stops): their producers reopen elsewhere."""
        self._stopped.set()

    def _path(self) -> TransactionPath:
        if self._transactions is None:
            raise InvalidRequestError(
                "transactional messages need replication = raft; this node runs master-slave"
            )
        return self._transactions

    # ------------------------------------------------------------------ half messages

    def check_half(self, request: client_pb2.ProduceRequest) -> None:
        """A half produce's checks, before its message is converted."""
        self._path()
        require_group_name(request.transaction_group, self._limits.message_limits)
        if request.records or len(request.messages) != 1:
            raise InvalidRequestError(
                "a transactional send holds exactly one message, in messages (not records)"
            )
        if wants_delay(request):
            raise InvalidRequestError("a transactional message cannot have a delay")
        if not request.messages[0].uniq_key:
            raise InvalidRequestError(
                "a transactional message needs a uniq_key: it is the transaction id"
            )

    def produce_half(
        self,
        request: client_pb2.ProduceRequest,
        message: Message,
        queue_count_of: Callable[[str], int],
        timeout_s: float,
    ) -> client_pb2.ProduceResponse:
        """Store ``message`` (the request's, converted) as a half message."""
        queue_count = queue_count_of(message.topic)
        if not message.queue_id < queue_count:
            raise InvalidQueueIdError(
                f"queue id {message.queue_id} is not below topic {message.topic!r}'s "
                f"{queue_count} queues"
            )
        outcome = self._write_path.produce(
            [to_half(message, request.transaction_group)],
            producer_id=request.producer_id,
            sequence=request.sequence,
            timeout_s=timeout_s,
        )
        response = produce_response(outcome)
        response.results[0].transaction_queue_id = message.queue_id
        return response

    # ------------------------------------------------------------------ EndTransaction

    def end_transaction(
        self, request: client_pb2.EndTransactionRequest, timeout_s: float
    ) -> client_pb2.EndTransactionResponse:
        path = self._path()
        limits = self._limits.message_limits
        require_group_name(request.producer_group, limits)
        require_client_topic(request.topic, limits)
        if not request.transaction_id:
            raise InvalidRequestError("transaction_id is empty (the half message's uniq_key)")
        physical_offset_of_message_id(request.msg_id)
        commit = _RESOLUTIONS.get(request.resolution)
        if commit is None:
            raise InvalidRequestError("resolution must be COMMIT or ROLLBACK")
        outcome = path.end_transaction(
            EndTransaction(
                request.producer_group,
                request.topic,
                request.transaction_id,
                request.msg_id,
                commit,
                request.from_check,
            ),
            timeout_s=timeout_s,
        )
        response = client_pb2.EndTransactionResponse(duplicate=outcome.duplicate)
        if outcome.decision_known:
            response.resolution = (
                client_pb2.TRANSACTION_RESOLUTION_COMMIT
                if outcome.commit
                else client_pb2.TRANSACTION_RESOLUTION_ROLLBACK
            )
        if outcome.result is not None:
            response.result.CopyFrom(
                client_pb2.ProduceResult(
                    queue_id=outcome.queue_id,
                    queue_offset=outcome.result.queue_offset,
                    physical_offset=outcome.result.physical_offset,
                    msg_id=outcome.result.msg_id,
                )
            )
        return response

    # ------------------------------------------------------------------ TransactionChecks

    def checks(
        self, request: client_pb2.TransactionChecksRequest, context: grpc.ServicerContext
    ) -> Iterator[Any]:
        """The check stream (see the module rules)."""
        with abort_on_error(context):
            checkers = self._path().checkers
            self._check_stream_request(request)
            _require_leader(self._write_path)
            stream = checkers.attach(request.producer_group, request.client_id, request.topics)
        try:
            yield client_pb2.TransactionCheck()
            while context.is_active():
                check = stream.get(_CHECK_POLL_S)
                if check is not None:
                    yield check_message(check)
                    continue
                with abort_on_error(context):
                    if self._stopped.is_set():
                        raise ShuttingDownError("the node is shutting down")
                    _require_leader(self._write_path)
        finally:
            checkers.detach(stream)

    def _check_stream_request(self, request: client_pb2.TransactionChecksRequest) -> None:
        limits = self._limits.message_limits
        require_group_name(request.producer_group, limits)
        if not CLIENT_ID_PATTERN.fullmatch(request.client_id):
            raise InvalidRequestError(
                f"client_id {request.client_id[:40]!r} must be 1..128 characters from "
                "[A-Za-z0-9._@:%|-]"
            )
        if not 1 <= len(request.topics) <= MAX_CHECK_TOPICS:
            raise InvalidRequestError(
                f"topics holds {len(request.topics)} names; a check stream names "
                f"1..{MAX_CHECK_TOPICS}"
            )
        for topic in request.topics:
            require_topic_name(topic, limits)


def _require_leader(write_path: WritePath) -> None:
    view = write_path.cluster_view()
    if view.role != "leader":
        leader = view.leader_id if view.leader_id != view.node_id else None
        raise NotLeaderError(leader, view.leader_address if leader else None, view.term)


def check_message(check: CheckRequest) -> Any:
    """A TransactionCheck for ``check``: the half shown as its real message."""
    half = check.half
    message = stored_message(check.record)
    message.topic = half.real_topic
    message.queue_id = half.real_queue_id
    kept = [p for p in message.properties if p.name not in HALF_PROPERTIES]
    del message.properties[:]
    message.properties.extend(kept)
    return client_pb2.TransactionCheck(
        message=message, transaction_id=half.transaction_id, check_times=check.check_times
    )
