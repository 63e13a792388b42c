"""The consumer groups' retry and dead-letter topics (RocketMQ's ``%RETRY%<group>`` and
``%DLQ%<group>``), and what a message sent back for later (``RECONSUME_LATER``) becomes.

A message sent back with ``reconsume_times`` r (0 on its first delivery) goes, while
r < max_reconsume_times, to the group's retry topic through the schedule topic, at delay
level 3 + r (the last level at most), as a copy whose ``reconsume_times`` is r + 1; once
r >= max_reconsume_times, to the group's dead-letter topic at once. The copy keeps body,
tags, keys, properties, born time and host, and carries ``RETRY_TOPIC`` (the topic it was
first consumed from; consumers show it as the message's topic) and ``ORIGIN_MESSAGE_ID``
(the first copy's message id).

Rules this module keeps: pure (no store, no clock); the topics it names are written only by
the node (``is_node_written_topic``: a client may read them, never produce to them).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftlog.node.control import is_reserved_topic
from raftlog.node.messaging.transaction import is_transaction_topic
from raftlog.store.hashing import SCHEDULE_TOPIC

RETRY_TOPIC_PREFIX = "%RETRY%"
DLQ_TOPIC_PREFIX = "%DLQ%"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DEFAULT_MAX_RECONSUME_TIMES = 16
FIRST_RETRY_DELAY_LEVEL = 3
RETRY_QUEUE_COUNT = 1
DLQ_QUEUE_COUNT = 1


def retry_topic(group: str) -> str:
    return RETRY_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_TOPIC_PREFIX + group


def is_node_topic(topic: str) -> bool:
    """A topic every member makes for itself (control, schedule, transaction half and op):
    not a user's, so it counts toward no topic limit and is left out of per-topic metrics."""
    return is_reserved_topic(topic) or topic == SCHEDULE_TOPIC or is_transaction_topic(topic)


def is_node_written_topic(topic: str) -> bool:
    """The schedule, retry, dead-letter and transaction (half, op) topics: only the node
    writes them."""
    return (
        topic == SCHEDULE_TOPIC
        or topic.startswith(RETRY_TOPIC_PREFIX)
        or topic.startswith(DLQ_TOPIC_PREFIX)
        or is_transaction_topic(topic)
    )


@dataclass(frozen=True, slots=True)
class SendBackPlan:
    """Where a sent-back message goes: ``topic`` (retry or dead-letter), at ``delay_level``
    (None: at once, the dead-letter topic), with ``reconsume_times``."""

    topic: str
    dead_letter: bool
    delay_level: int | None
    reconsume_times: int


def plan_send_back(
    group: str,
    reconsume_times: int,
    max_reconsume_times: int,
    level_count: int,
    delay_level: int = 0,
) -> SendBackPlan:
    """Where a message consumed ``reconsume_times`` times before goes when sent back (see
    the module docstring); ``delay_level`` > 0 asks for that level instead of 3 + r."""
    if reconsume_times >= max_reconsume_times:
        return SendBackPlan(dlq_topic(group), True, None, reconsume_times + 1)
    level = delay_level or FIRST_RETRY_DELAY_LEVEL + reconsume_times
    return SendBackPlan(retry_topic(group), False, min(level, level_count), reconsume_times + 1)
