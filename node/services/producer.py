"""The Producer gRPC service: Produce, through the node's WritePath.

Rules this module keeps:
- Limits first (limits.py): the request's bytes and message count, and the produces in flight
  on its connection (counted while the call runs, refusals included).
- Stateless checks next (wire.py): topic name and reserved prefix, exactly one of
  ``messages``/``records``, producer id and sequence, negative fields, sys_flag bits, and the
  delay fields (delayed_produce.py). Whether the topic and queues exist is the store's and
  the write path's business.
- A delay message is rewritten into the schedule topic before the write path sees it
  (delayed_produce.py), so idempotence, atomicity and the answer are a plain batch's.
- The write waits at most min(what is left of the call's deadline, ``max_write_timeout_s``);
  past that the write path answers UNKNOWN OUTCOME (DEADLINE_EXCEEDED), never "failed".
- A member that is not the leader refuses before proposing (FAILED_PRECONDITION + NotLeader):
  even when the topic is not yet known on this member, so a client is redirected, not told the
  topic does not exist.
- A transactional send (``transaction_group``) passes the same checks, then is stored as a
  half message; EndTransaction and the TransactionChecks stream are transactions.py's.
- Every error becomes a status through ``status_codes.abort_on_error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from raftlog.node.errors import NotLeaderError
from raftlog.node.messaging.rewrite import messages_of_records
from raftlog.node.services.delayed_produce import check_delay, delayed, wants_delay
from raftlog.node.services.limits import (
    InflightLimit,
    ServiceLimits,
    require_within,
    timeout_for_call,
)
from raftlog.node.services.status_codes import abort_on_error
from raftlog.node.services.transactions import END_TRANSACTION_OVERRIDES, TransactionCalls
from raftlog.node.services.wire import (
    QueueSelector,
    born_host_from_peer,
    produce_response,
    require_client_topic,
    require_messages_or_records,
    require_producer_identity,
    store_messages,
)
from raftlog.node.transaction_path import TransactionPath
from raftlog.node.write_path import ClusterView, ProduceOutcome, WritePath
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.store.errors import UnknownTopicError
from raftlog.store.message_store import Message, MessageStore

# Cluster views refresh every 50 ms (or at a role change); polling faster would not see more.
_VIEW_POLL_S = 0.02
# How long a member that knows no leader waits for one before it answers "no leader": about
# what an election takes (node/replication/replica.py waits the same way on the write path).
_LEADER_WAIT_S = 2.0


class ProducerService(client_pb2_grpc.ProducerServicer):
    def __init__(
        self,
        store: MessageStore,
        write_path: WritePath,
        limits: ServiceLimits,
        transactions: TransactionPath | None = None,
    ) -> None:
        self._store = store
        self._write_path = write_path
        self._limits = limits
        self._selector = QueueSelector()
        self._inflight = InflightLimit(
            limits.max_inflight_produce_count, "max_inflight_produce_count", "produces"
        )
        self._transactions = TransactionCalls(write_path, limits, transactions)

    def stop(self) -> None:
        """End the check streams (the node stops)."""
        self._transactions.stop()

    def Produce(
        self, request: client_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> client_pb2.ProduceResponse:
        with abort_on_error(context), self._inflight.admit(context.peer()):
            if request.transaction_group:
                return self._produce_half(request, context)
            return produce_response(self._produce(request, context))

    def EndTransaction(
        self, request: client_pb2.EndTransactionRequest, context: grpc.ServicerContext
    ) -> client_pb2.EndTransactionResponse:
        with abort_on_error(context, overrides=END_TRANSACTION_OVERRIDES):
            timeout_s = timeout_for_call(context.time_remaining(), self._limits.max_write_timeout_s)
            return self._transactions.end_transaction(request, timeout_s)

    def TransactionChecks(
        self, request: client_pb2.TransactionChecksRequest, context: grpc.ServicerContext
    ) -> Iterator[Any]:
        return self._transactions.checks(request, context)

    def _produce_half(
        self, request: client_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> client_pb2.ProduceResponse:
        """A transactional send: checked as any produce, stored as a half message."""
        self._transactions.check_half(request)
        self._check(request)
        message = self._messages(request, context)[0]
        return self._transactions.produce_half(
            request,
            message,
            self._queue_count,
            timeout_for_call(context.time_remaining(), self._limits.max_write_timeout_s),
        )

    def _check(self, request: client_pb2.ProduceRequest) -> None:
        """The limits and stateless checks every produce passes first."""
        limits = self._limits
        require_within(
            request.ByteSize(),
            limits.max_produce_request_bytes,
            "max_produce_request_bytes",
            "the request's size in bytes",
        )
        require_within(
            len(request.messages),
            limits.max_produce_message_count,
            "max_produce_message_count",
            "the request's message count",
        )
        require_client_topic(request.topic, limits.message_limits)
        require_messages_or_records(request)
        require_producer_identity(
            request.producer_id, request.sequence, limits.max_producer_id_bytes
        )
        check_delay(request, limits.delay, self._write_path)

    def _produce(
        self, request: client_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> ProduceOutcome:
        self._check(request)
        limits = self._limits
        if request.records and not wants_delay(request):
            return self._write_path.produce_encoded(
                request.topic,
                request.records,
                producer_id=request.producer_id,
                sequence=request.sequence,
                timeout_s=timeout_for_call(context.time_remaining(), limits.max_write_timeout_s),
            )
        messages = self._messages(request, context)
        return self._write_path.produce(
            messages,
            producer_id=request.producer_id,
            sequence=request.sequence,
            # Computed last: the conversion above took some of the call's time.
            timeout_s=timeout_for_call(context.time_remaining(), limits.max_write_timeout_s),
        )

    def _messages(
        self, request: client_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> list[Message]:
        """The batch as store Messages, rewritten into the schedule topic when it asks for a
        delay (delayed_produce.py)."""
        if request.records:
            messages = messages_of_records(request.topic, request.records)
        else:
            messages = store_messages(
                request.topic,
                request.messages,
                queue_count_of=self._queue_count,
                selector=self._selector,
                born_host=born_host_from_peer(context.peer()),
            )
        if wants_delay(request):
            return delayed(messages, request, self._limits.delay)
        return messages

    def _queue_count(self, topic: str) -> int:
        """The topic's queue count from this member's applied state. A topic unknown here
        may exist at the leader (this member lags, or is not the leader): redirect first,
        after waiting a little for an election under way. A leader looks again once it has
        applied every entry it held when the lookup failed (a new leader's inherited log may
        create the topic; followers learn commits lazily, raft ``announce_commit_on_tick``),
        so a topic is refused only after that."""
        try:
            return self._store.describe_topic(topic).queue_count
        except UnknownTopicError:
            pass
        view = self._write_path.cluster_view()
        if view.leader_id is None:
            view = self._await_view(lambda v: v.leader_id is not None, _LEADER_WAIT_S)
        if view.role == "leader" and view.applied_index < view.last_index:
            held = view.last_index
            view = self._await_view(
                lambda v: v.role != "leader" or v.applied_index >= held,
                self._limits.max_write_timeout_s,
            )
        if view.role != "leader":
            raise NotLeaderError(view.leader_id, view.leader_address, view.term)
        return self._store.describe_topic(topic).queue_count

    def _await_view(self, done: Callable[[ClusterView], bool], bound_s: float) -> ClusterView:
        """Poll this member's cluster view until ``done`` holds or ``bound_s`` passes."""
        deadline = time.monotonic() + bound_s
        view = self._write_path.cluster_view()
        for _ in range(int(bound_s / _VIEW_POLL_S) + 1):
            if done(view) or time.monotonic() >= deadline:
                break
            time.sleep(_VIEW_POLL_S)
            view = self._write_path.cluster_view()
        return view
