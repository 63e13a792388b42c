"""The Producer gRPC service: Produce, through the node's WritePath.

Rules this module keeps:
- Stateless checks first (wire.py): topic name and reserved prefix, exactly one of
  ``messages``/``records``, producer id and sequence, negative fields, sys_flag bits. Whether
  the topic and queues exist is the store's and the write path's business.
- The write waits at most min(what is left of the call's deadline, ``max_write_timeout_s``);
  past that the write path answers UNKNOWN OUTCOME (DEADLINE_EXCEEDED), never "failed".
- A member that is not the leader refuses before proposing (FAILED_PRECONDITION + NotLeader):
  even when the topic is not yet known on this member, so a client is redirected, not told the
  topic does not exist.
- Every error becomes a status through ``status_codes.abort_on_error``.
"""

from __future__ import annotations

import time

import grpc

from raftlog.node.errors import NotLeaderError
from raftlog.node.service_limits import ServiceLimits, timeout_for_call
from raftlog.node.status_codes import abort_on_error
from raftlog.node.wire import (
    QueueSelector,
    born_host_from_peer,
    produce_response,
    require_client_topic,
    require_messages_or_records,
    require_producer_identity,
    store_messages,
)
from raftlog.node.write_path import ProduceOutcome, WritePath
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.store.errors import UnknownTopicError
from raftlog.store.message_store import MessageStore

# How often a leader looks whether it has applied what it held (cluster views refresh every
# 50 ms, so polling faster would not see more).
_APPLY_POLL_S = 0.02


class ProducerService(client_pb2_grpc.ProducerServicer):
    def __init__(self, store: MessageStore, write_path: WritePath, limits: ServiceLimits) -> None:
        self._store = store
        self._write_path = write_path
        self._limits = limits
        self._selector = QueueSelector()

    def Produce(
        self, request: client_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> client_pb2.ProduceResponse:
        with abort_on_error(context):
            return produce_response(self._produce(request, context))

    def _produce(
        self, request: client_pb2.ProduceRequest, context: grpc.ServicerContext
    ) -> ProduceOutcome:
        limits = self._limits
        require_client_topic(request.topic, limits.message_limits)
        require_messages_or_records(request)
        require_producer_identity(
            request.producer_id, request.sequence, limits.max_producer_id_bytes
        )
        if request.records:
            return self._write_path.produce_encoded(
                request.topic,
                request.records,
                producer_id=request.producer_id,
                sequence=request.sequence,
                timeout_s=timeout_for_call(context.time_remaining(), limits.max_write_timeout_s),
            )
        messages = store_messages(
            request.topic,
            request.messages,
            queue_count_of=self._queue_count,
            selector=self._selector,
            born_host=born_host_from_peer(context.peer()),
        )
        return self._write_path.produce(
            messages,
            producer_id=request.producer_id,
            sequence=request.sequence,
            # Computed last: the conversion above took some of the call's time.
            timeout_s=timeout_for_call(context.time_remaining(), limits.max_write_timeout_s),
        )

    def _queue_count(self, topic: str) -> int:
        """The topic's queue count from this member's applied state. A topic unknown here
        may exist at the leader (this member lags, or is not the leader): redirect first. A
        leader looks again once it has applied every entry it held when the lookup failed
        (a new leader's inherited log may create the topic; followers learn commits lazily,
        raft ``announce_commit_on_tick``), so a topic is refused only after that."""
        try:
            return self._store.describe_topic(topic).queue_count
        except UnknownTopicError:
            view = self._write_path.cluster_view()
            if view.role != "leader":
                raise NotLeaderError(view.leader_id, view.leader_address, view.term) from None
            if view.applied_index >= view.last_index or not self._applied_through(view.last_index):
                raise
        return self._store.describe_topic(topic).queue_count

    def _applied_through(self, index: int) -> bool:
        """Wait (bounded) until this member, still leading, has applied ``index``."""
        deadline = time.monotonic() + self._limits.max_write_timeout_s
        for _ in range(int(self._limits.max_write_timeout_s / _APPLY_POLL_S) + 1):
            view = self._write_path.cluster_view()
            if view.role != "leader":
                return False
            if view.applied_index >= index:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_APPLY_POLL_S)
        return False
