"""Sending consumed messages back for later: ``Consumer.reconsume_later`` (RocketMQ's
RECONSUME_LATER / sendMessageBack) through the Consumer.SendBack RPC.

The leader stores a copy in the group's retry topic ``%RETRY%<group>`` (delivered again after
delay level 3 + reconsume_times, later levels for later retries) or, after
``max_reconsume_times`` retries, in its dead-letter topic ``%DLQ%<group>``
(client.proto SendBack; docs/messaging.md).

Rules this module keeps:
- ``send`` returns only once the copy is durable (committed like a produce), so the caller may
  then commit past the original: at-least-once. A failure raises, and nothing says the copy
  exists: consume the message again (or send it back again) before committing past it.
- Idempotent like the producer: each thread has its own producer id and sequences (so sends
  from several threads never make a sequence gap), an unknown outcome is retried with the
  same pair, and after any failure that thread starts a fresh producer id, so an abandoned
  sequence never blocks the next send. A copy stored by an attempt whose answer was lost is
  then answered as a duplicate, not stored twice.
- Thread-safe: a push consumer's listener threads call it concurrently.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any

from raftlog.client.connection import Connection
from raftlog.client.errors import RaftlogError
from raftlog.client.messages import Message
from raftlog.client.retry import RetryPolicy
from raftlog.proto import client_pb2

RETRY_TOPIC_PREFIX = "%RETRY%"
DLQ_TOPIC_PREFIX = "%DLQ%"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
"""A retried message's property naming the topic it was first consumed from."""
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DEFAULT_MAX_RECONSUME_TIMES = 16


def retry_topic(group: str) -> str:
    return RETRY_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_TOPIC_PREFIX + group


@dataclass(frozen=True, slots=True)
class SendBackResult:
    """Where a message sent back went: ``topic`` is the group's retry or dead-letter topic;
    ``msg_id`` the copy's id (for a retry: in the schedule topic until it is due)."""

    topic: str
    dead_lettered: bool
    reconsume_times: int
    msg_id: str
    duplicate: bool = False


class SendBacks:
    """Sends back messages ``group`` consumed (see the module rules)."""

    def __init__(
        self,
        connection: Connection,
        group: str,
        max_reconsume_times: int,
        policy: RetryPolicy,
    ) -> None:
        # At least 1: 0 on the wire means the server's default (16).
        if not 1 <= max_reconsume_times <= 0xFFFFFFFF:
            raise ValueError(f"max_reconsume_times is {max_reconsume_times}; it must be >= 1")
        self._connection = connection
        self._group = group
        self._max_reconsume_times = max_reconsume_times
        self._policy = policy
        self._local = threading.local()

    def _identity(self) -> tuple[str, int]:
        """This thread's producer id and its next sequence."""
        local = self._local
        if getattr(local, "producer_id", None) is None:
            local.producer_id, local.next_sequence = str(uuid.uuid4()), 1
        sequence = local.next_sequence
        local.next_sequence += 1
        return local.producer_id, sequence

    def send(self, message: Message, delay_level: int = 0) -> SendBackResult:
        """Send ``message`` (as a Consumer returned it) back; see the module rules."""
        producer_id, sequence = self._identity()
        request = client_pb2.SendBackRequest(
            group=self._group,
            topic=message.pulled_topic or message.topic,
            msg_id=message.msg_id,
            max_reconsume_times=self._max_reconsume_times,
            delay_level=delay_level,
            producer_id=producer_id,
            sequence=sequence,
        )

        def attempt(timeout_s: float) -> Any:
            return self._connection.call(
                "Consumer", "SendBack", request, timeout_s=timeout_s, leader_only=True, write=True
            )

        try:
            response = self._policy.run(attempt, idempotent=True)
        except RaftlogError:
            self._local.producer_id = None  # a fresh id: no gap, no blocked sequence
            raise
        return SendBackResult(
            topic=response.topic,
            dead_lettered=response.dead_lettered,
            reconsume_times=response.reconsume_times,
            msg_id=response.result.msg_id,
            duplicate=response.duplicate,
        )
