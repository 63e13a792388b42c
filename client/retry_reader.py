"""RetryReader: a consumer group's retry topic (``%RETRY%<group>``), read beside the
consumer's own topic, so messages sent back (``Consumer.reconsume_later``) come back to the
group by themselves, as RocketMQ's push consumer subscribes to its retry topic.

A message read here is handed over as it was first consumed: ``topic`` is the topic it was
first consumed from (its ``RETRY_TOPIC`` property), ``pulled_topic`` the retry topic (where
its ``queue_id`` and ``queue_offset`` are, and where a further send-back names it), and
``reconsume_times`` counts its retries.

Rules this module keeps:
- Never in the way of the consumer's own topic: it is asked without a long poll, at most every
  ``IDLE_POLL_INTERVAL_S`` while it has nothing (retries are delayed by seconds anyway), and a
  retry topic that does not exist yet (no message was ever sent back) is looked for again
  every ``ABSENT_RECHECK_S``. A failure is logged and retried later, never raised to the
  caller of ``poll``.
- Its positions are the group's committed offsets of the retry topic, committed with the
  consumer's own (``commit``): at-least-once, like the topic itself.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from raftlog.client.errors import NotFoundError, RaftlogError
from raftlog.client.messages import Message
from raftlog.client.send_back import PROPERTY_RETRY_TOPIC

_log = logging.getLogger(__name__)

IDLE_POLL_INTERVAL_S = 0.1
ABSENT_RECHECK_S = 1.0
_ERROR_BACKOFF_S = 1.0


class TopicReader(Protocol):
    """What RetryReader needs of the consumer reading the retry topic."""

    def poll(self, timeout_s: float = ...) -> list[Message]: ...

    @property
    def positions(self) -> dict[int, int]: ...

    def commit(self, offsets: Mapping[int, int] | None = None) -> int | None: ...

    def close(self) -> None: ...


class RetryReader:
    def __init__(self, reader: TopicReader, topic: str) -> None:
        self._reader = reader
        self.topic = topic
        self._next_poll_at = 0.0
        # Whether the reader has its positions (the topic exists): only then is there
        # anything to commit.
        self._started = False

    def poll(self) -> list[Message]:
        """Retried messages ready now (none when it was asked too recently)."""
        now = time.monotonic()
        if now < self._next_poll_at:
            return []
        try:
            messages = self._reader.poll(0.0)
        except NotFoundError:
            self._next_poll_at = now + ABSENT_RECHECK_S
            return []
        except RaftlogError as error:
            _log.warning("retry topic %s: %s; asked again shortly", self.topic, error)
            self._next_poll_at = now + _ERROR_BACKOFF_S
            return []
        self._started = True
        if not messages:
            self._next_poll_at = now + IDLE_POLL_INTERVAL_S
        return [as_first_consumed(m) for m in messages]

    def poll_with(
        self, poll_own: Callable[[float], list[Message]], timeout_s: float
    ) -> list[Message]:
        """``poll_own(timeout)`` (the consumer's own topic) in slices short enough that
        retried messages are looked at in between; whichever has messages first answers."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        for _ in range(2 + int(timeout_s / IDLE_POLL_INTERVAL_S)):
            retried = self.poll()
            if retried:
                return retried
            if not self._started:
                return poll_own(timeout_s)  # no retry topic yet: the own topic alone
            now = time.monotonic()
            messages = poll_own(min(max(0.0, deadline - now), IDLE_POLL_INTERVAL_S))
            if messages or time.monotonic() >= deadline:
                return messages
        return []

    @property
    def positions(self) -> dict[int, int]:
        """Retry queue id -> the next offset to read ({} before the topic exists)."""
        return self._reader.positions if self._started else {}

    def commit(self, offsets: Mapping[int, int] | None = None) -> int | None:
        """Commit the retry topic's positions, or ``offsets`` instead (None when none
        changed, or it does not exist)."""
        return self._reader.commit(offsets) if self._started else None

    def close(self) -> None:
        self._reader.close()


def as_first_consumed(message: Message) -> Message:
    """A retry topic message as its first consumption showed it (see the module docstring)."""
    first_topic = dict(message.properties).get(PROPERTY_RETRY_TOPIC)
    return dataclasses.replace(
        message, topic=first_topic or message.topic, pulled_topic=message.topic
    )
