"""The client services' limits and defaults, in one place (``ServiceLimits``).

Rules this module keeps:
- Every limit the client API applies on the server side lives here, with its unit in its name;
  servicers read them from the one ``ServiceLimits`` they are built with, never from constants.
- Request fields that are "0 = the server's default" (client.proto Conventions) resolve through
  ``server_default``: 0 gives the default, anything above the cap gives the cap.
- A call never waits past its own deadline: ``timeout_for_call`` bounds a wait by what is left
  of the call's deadline and by the configured cap.
- A request over a limit is refused before anything is done, with a message naming the limit's
  setting (docs/configuration.md, "Limits"): INVALID_ARGUMENT when the request itself is too
  big (``require_within``), RESOURCE_EXHAUSTED when the node is full (``LimitReachedError``:
  the topic table, a connection's produces in flight).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields

from raftlog.node.errors import InvalidRequestError
from raftlog.node.messaging.delay import DelaySettings
from raftlog.store.topic_config import MAX_QUEUE_COUNT
from raftlog.store.validation import Limits

MIB = 1024 * 1024
# A Pull asking for "the server's default" gets this many messages at most.
DEFAULT_PULL_MESSAGES = 32


class DeadlinePassedError(Exception):
    """The call's deadline passed before the request could be started (nothing was done)."""


class LimitReachedError(Exception):
    """A node-wide limit is reached (RESOURCE_EXHAUSTED); the message names its setting."""


@dataclass(frozen=True, slots=True)
class ServiceLimits:
    """Caps and defaults of the client-facing gRPC services."""

    # A write (Produce, CommitOffsets, CreateTopic) or linearizable read (FetchOffsets) waits at
    # most this long for its outcome, even when the call's deadline is later.
    max_write_timeout_s: float = 10.0
    # A leadership transfer takes an election or two: longer than a write.
    max_transfer_timeout_s: float = 30.0
    # Pull's long polling waits at most this long (client.proto: "The server caps it").
    max_long_poll_ms: int = 30_000
    # A long poll wakes at least this often to notice a stopping server or a cancelled call
    # (wait_visible only wakes on new messages).
    long_poll_slice_ms: int = 250
    # A long poll answers this long before the call's deadline, so the answer arrives in time.
    long_poll_deadline_margin_ms: int = 100
    default_pull_messages: int = DEFAULT_PULL_MESSAGES
    max_pull_messages: int = 1024
    default_pull_bytes: int = 4 * MIB
    # Below the 64 MiB receive limit client.proto asks clients to set (a body may be 4 MiB).
    max_pull_bytes: int = 32 * MIB
    # With several tags in a Pull filter, at most this many units are scanned per call (the
    # store's own bound for one tag is the same), so a sparse tag cannot make one call long.
    max_pull_units_scanned: int = 16384
    default_query_messages: int = 32
    max_query_messages: int = 1024
    # QueryByKey stops adding messages past this many record bytes (at least one is returned),
    # so 1024 large messages cannot make an answer over the clients' receive limit.
    max_query_bytes: int = 32 * MIB
    # client.proto ProduceRequest.producer_id: "at most 64 bytes".
    max_producer_id_bytes: int = 64
    # Topic name rules (length, characters): the same Limits the store is configured with.
    message_limits: Limits = field(default_factory=Limits)
    # RocketMQ topics have 4 to 16 queues, rarely a few hundred; every queue is a ConsumeQueue
    # directory and a pull target, so a bound far below the store's 65,536 keeps one request
    # from making tens of thousands of them.
    max_topic_queue_count: int = 1024
    # The topic table lives in every member's memory and every snapshot: bounded too.
    max_topic_count: int = 8192
    # A Produce request's serialized size: four bodies at the 4 MiB limit, far below the gRPC
    # receive limit (64 MiB) and the write path's in-flight bytes (64 MiB).
    max_produce_request_bytes: int = 16 * MIB
    # RocketMQ caps a batch by size only; a count bound keeps per-message work per call bounded.
    max_produce_message_count: int = 4096
    # Produce calls one connection (gRPC's peer address) may have in flight. Pipelining
    # clients keep up to 64 (the benches do); past that, calls only queue behind the 64
    # handler threads, so this bounds what one connection can pile up on the node.
    max_inflight_produce_count: int = 128
    # Delay messages: the level table and how far ahead a delivery time may be (node settings
    # message_delay_level and timer_max_delay_ms; node/messaging/delay.py).
    delay: DelaySettings = field(default_factory=DelaySettings)
    # Orderly consumption: a queue lock's lease (node setting consumer_lock_lease_ms;
    # RocketMQ's REBALANCE_LOCK_MAX_LIVE_TIME, 30 s), which is also how long a new leader
    # waits before it grants one (node/messaging/queue_lock_table.py).
    consumer_lock_lease_ms: int = 30_000
    # The leader's in-memory tables of group members and queue locks (group_coordinator.py).
    max_group_members: int = 65_536
    max_queue_locks: int = 262_144

    def __post_init__(self) -> None:
        for limit in fields(self):
            value = getattr(self, limit.name)
            if isinstance(value, int | float) and value <= 0:
                raise ValueError(f"ServiceLimits.{limit.name} must be positive, got {value}")
        for default_name, cap_name in (
            ("default_pull_messages", "max_pull_messages"),
            ("default_pull_bytes", "max_pull_bytes"),
            ("default_query_messages", "max_query_messages"),
        ):
            if getattr(self, default_name) > getattr(self, cap_name):
                raise ValueError(
                    f"ServiceLimits.{default_name} {getattr(self, default_name)} is above "
                    f"{cap_name} {getattr(self, cap_name)}"
                )
        if self.max_topic_queue_count > MAX_QUEUE_COUNT:
            raise ValueError(
                f"ServiceLimits.max_topic_queue_count {self.max_topic_queue_count} is above "
                f"the store's {MAX_QUEUE_COUNT}"
            )


def server_default(requested: int, default: int, cap: int) -> int:
    """A request's "0 = server default" field: 0 gives ``default``, else at most ``cap``."""
    if requested <= 0:
        return default
    return min(requested, cap)


def timeout_for_call(time_remaining_s: float | None, cap_s: float) -> float:
    """How long a call may wait: what is left of its deadline (None: no deadline), at most
    ``cap_s``. Raises DeadlinePassedError when nothing is left, before anything is started."""
    if time_remaining_s is None:
        return cap_s
    if time_remaining_s <= 0:
        raise DeadlinePassedError("the call's deadline passed before the request was started")
    return min(time_remaining_s, cap_s)


def require_within(value: int, cap: int, setting: str, what: str) -> None:
    """Refuse (INVALID_ARGUMENT) a request whose ``what`` is ``value``, above ``cap``."""
    if value > cap:
        raise InvalidRequestError(f"{what} is {value}; the limit is {cap} ({setting})")


class InflightLimit:
    """Counts the calls in flight per connection (gRPC's ``context.peer()``: address and
    port, so one channel is one connection) and refuses one past ``cap``."""

    def __init__(self, cap: int, setting: str, what: str) -> None:
        self._cap = cap
        self._setting = setting
        self._what = what
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    @contextmanager
    def admit(self, peer: str) -> Iterator[None]:
        """Hold one of ``peer``'s slots for the ``with`` body, or raise LimitReachedError."""
        with self._lock:
            held = self._counts.get(peer, 0)
            if held >= self._cap:
                raise LimitReachedError(
                    f"{held} {self._what} in flight on connection {peer}; the limit is "
                    f"{self._cap} ({self._setting})"
                )
            self._counts[peer] = held + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._counts[peer] - 1
                if left:
                    self._counts[peer] = left
                else:
                    del self._counts[peer]
