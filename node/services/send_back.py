"""SendBack: a consumed message sent back for later (RocketMQ's consumerSendMsgBack, the
consumer's RECONSUME_LATER; client.proto says what the caller sees).

The leader reads the message by its id and writes a copy through the write path, like a
produce: to the group's retry topic through the schedule topic, at delay level 3 +
reconsume_times, or, once the message was retried ``max_reconsume_times`` times, to the
group's dead-letter topic at once (node/messaging/retry.py decides, and says what the copy
keeps). The retry and dead-letter topics are created with one queue when missing.

Rules this module keeps:
- Stateless checks first (wire.py): group, topic, message id, producer id; a bad one is
  INVALID_ARGUMENT and nothing is read or written.
- Only the leader serves it (the copy must come from the committed log, and a lagging
  follower may not show the message yet): elsewhere, "not leader" before anything is read.
- The id must name a message of the request's topic: a consumer sends back only what it
  consumed, from its own topic or its group's retry topic.
- The copy is an idempotent produce (the request's producer id and sequence), so a resend
  after an unknown outcome stores it once; OK means it is durable, so the original's offset
  may be committed (at-least-once).
- Raft mode only, as the delay messages a retry rides on.
"""

from __future__ import annotations

import dataclasses
import time

from raftlog.node.errors import InvalidRequestError, NotLeaderError
from raftlog.node.messaging.retry import (
    DEFAULT_MAX_RECONSUME_TIMES,
    DLQ_QUEUE_COUNT,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    RETRY_QUEUE_COUNT,
    RETRY_TOPIC_PREFIX,
    plan_send_back,
)
from raftlog.node.messaging.rewrite import SCHEDULE_PROPERTIES, message_of_record, to_schedule
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.services.wire import (
    physical_offset_of_message_id,
    require_group_name,
    require_producer_identity,
    require_topic_name,
)
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2
from raftlog.store.message_store import Message, MessageStore
from raftlog.store.record import MessageRecord

_COPY_DROPS = SCHEDULE_PROPERTIES | {PROPERTY_RETRY_TOPIC, PROPERTY_ORIGIN_MESSAGE_ID}


class SendBack:
    """Serves Consumer.SendBack over one store and write path."""

    def __init__(self, store: MessageStore, write_path: WritePath, limits: ServiceLimits) -> None:
        self._store = store
        self._write_path = write_path
        self._limits = limits

    def send_back(
        self, request: client_pb2.SendBackRequest, timeout_s: float
    ) -> client_pb2.SendBackResponse:
        """Store the copy (see the module docstring); ``timeout_s`` bounds the whole call."""
        deadline_s = time.monotonic() + timeout_s
        self._check(request)
        view = self._write_path.cluster_view()
        if view.role != "leader":
            raise NotLeaderError(view.leader_id, view.leader_address, view.term)
        if view.replication != "raft":
            raise InvalidRequestError(
                "retries need replication = raft; this node runs master-slave"
            )
        record = self._store.get_by_message_id(request.msg_id)
        if record.topic != request.topic:
            raise InvalidRequestError(
                f"msg_id {request.msg_id} names a message of topic {record.topic!r}, not "
                f"{request.topic!r}"
            )
        delay = self._limits.delay
        if request.delay_level:
            delay.level_delay_ms(request.delay_level)
        plan = plan_send_back(
            request.group,
            record.reconsume_times,
            request.max_reconsume_times or DEFAULT_MAX_RECONSUME_TIMES,
            len(delay.levels_ms),
            request.delay_level,
        )
        queue_count = DLQ_QUEUE_COUNT if plan.dead_letter else RETRY_QUEUE_COUNT
        self._write_path.create_topic(plan.topic, queue_count, timeout_s=_left(deadline_s))
        copy = _copy(record, request.msg_id, plan.topic, plan.reconsume_times)
        if plan.delay_level is not None:
            due_ms = time.time_ns() // 1_000_000 + delay.level_delay_ms(plan.delay_level)
            copy = to_schedule(copy, due_ms, plan.delay_level)
        outcome = self._write_path.produce(
            [copy],
            producer_id=request.producer_id,
            sequence=request.sequence,
            timeout_s=_left(deadline_s),
        )
        result = outcome.results[0]
        return client_pb2.SendBackResponse(
            topic=plan.topic,
            dead_lettered=plan.dead_letter,
            reconsume_times=plan.reconsume_times,
            result=client_pb2.ProduceResult(
                queue_id=outcome.queue_ids[0],
                queue_offset=result.queue_offset,
                physical_offset=result.physical_offset,
                msg_id=result.msg_id,
            ),
            duplicate=outcome.duplicate,
        )

    def _check(self, request: client_pb2.SendBackRequest) -> None:
        limits = self._limits
        require_group_name(request.group, limits.message_limits)
        longest = len(RETRY_TOPIC_PREFIX) + len(request.group)
        if longest > limits.message_limits.max_topic_chars:
            raise InvalidRequestError(
                f"group {request.group[:40]!r} is too long for a retry topic: "
                f"{RETRY_TOPIC_PREFIX!r} + the group is {longest} characters; the limit is "
                f"{limits.message_limits.max_topic_chars}"
            )
        require_topic_name(request.topic, limits.message_limits)
        physical_offset_of_message_id(request.msg_id)
        require_producer_identity(
            request.producer_id, request.sequence, limits.max_producer_id_bytes
        )


def _copy(record: MessageRecord, msg_id: str, topic: str, reconsume_times: int) -> Message:
    """The sent-back copy of ``record`` for ``topic``: every field kept, ``reconsume_times``
    set, and the topic it was first consumed from (RETRY_TOPIC) and the first copy's id
    (ORIGIN_MESSAGE_ID) carried from the record, or set when it is the first send-back."""
    copy = message_of_record(record, topic, 0, drop=_COPY_DROPS, reconsume_times=reconsume_times)
    first_topic = record.get_property(PROPERTY_RETRY_TOPIC) or record.topic
    origin = record.get_property(PROPERTY_ORIGIN_MESSAGE_ID) or msg_id
    extra = ((PROPERTY_RETRY_TOPIC, first_topic), (PROPERTY_ORIGIN_MESSAGE_ID, origin))
    return dataclasses.replace(copy, properties=copy.properties + extra)


def _left(deadline_s: float) -> float:
    return max(0.0, deadline_s - time.monotonic())
