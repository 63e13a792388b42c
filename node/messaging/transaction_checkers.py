"""The live check-back streams of transactional producers (Producer.TransactionChecks), by
producer group: where the Raft leader's coordinator sends a check of an undecided half
message (RocketMQ's ProducerManager channel table, for the check-back only).

Rules this module keeps:
- Soft state of one leadership: a stream is attached while its call lasts (the service
  detaches it when the call ends, and ends the call when the node stops leading, so the
  producer reopens it at the new leader). Nothing here is replicated: a check that finds no
  stream is simply not delivered, and the half is checked again after the check interval.
- A check goes to ONE stream of the half's producer group that named the half's real topic
  (with access control, naming a topic needs produce on it), round robin over the group's
  streams; a stream whose queue is full is passed over.
- Bounded: at most ``max_streams`` streams (each holds a server thread for as long as it
  lasts), each queue at most ``STREAM_QUEUE_CHECKS`` checks. A stream past the limit is
  refused (OverloadedError: RESOURCE_EXHAUSTED).
- Thread-safe: gRPC threads attach and read, the coordinator's thread offers.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from raftlog.node.errors import OverloadedError
from raftlog.node.messaging.transaction import HalfMessage
from raftlog.store.record import MessageRecord

DEFAULT_MAX_CHECK_STREAMS = 16
STREAM_QUEUE_CHECKS = 1024


@dataclass(frozen=True, slots=True)
class CheckRequest:
    """One check-back: the half's record, what it is, and the check's number (1-based)."""

    record: MessageRecord
    half: HalfMessage
    check_times: int


class CheckStream:
    """One producer's stream: the checks waiting to be sent on it."""

    def __init__(self, group: str, client_id: str, topics: Iterable[str]) -> None:
        self.group = group
        self.client_id = client_id
        self.topics = frozenset(topics)
        self._queue: queue.Queue[CheckRequest] = queue.Queue(maxsize=STREAM_QUEUE_CHECKS)

    def get(self, timeout_s: float) -> CheckRequest | None:
        """The next check, waiting up to ``timeout_s``; None when none came."""
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def put(self, request: CheckRequest) -> bool:
        try:
            self._queue.put_nowait(request)
        except queue.Full:
            return False
        return True


class CheckerRegistry:
    """The attached streams (see the module rules)."""

    def __init__(self, max_streams: int = DEFAULT_MAX_CHECK_STREAMS) -> None:
        if max_streams <= 0:
            raise ValueError(f"max_streams must be positive, got {max_streams}")
        self._max_streams = max_streams
        self._lock = threading.Lock()
        self._streams: dict[str, list[CheckStream]] = {}
        self._turns = itertools.count()

    def attach(self, group: str, client_id: str, topics: Iterable[str]) -> CheckStream:
        stream = CheckStream(group, client_id, topics)
        with self._lock:
            count = sum(len(streams) for streams in self._streams.values())
            if count >= self._max_streams:
                raise OverloadedError(
                    f"{count} transaction check streams are open on this node; the limit is "
                    f"{self._max_streams}: open one per producer process, not per producer"
                )
            self._streams.setdefault(group, []).append(stream)
        return stream

    def detach(self, stream: CheckStream) -> None:
        with self._lock:
            streams = self._streams.get(stream.group, [])
            if stream in streams:
                streams.remove(stream)
            if not streams:
                self._streams.pop(stream.group, None)

    def live(self, group: str, topic: str) -> int:
        """How many streams of ``group`` take checks of ``topic``."""
        with self._lock:
            return sum(1 for s in self._streams.get(group, ()) if topic in s.topics)

    def offer(self, request: CheckRequest) -> bool:
        """Queue ``request`` on one stream of its group that named its topic; False when no
        stream took it."""
        half = request.half
        with self._lock:
            streams = [
                s for s in self._streams.get(half.producer_group, ()) if half.real_topic in s.topics
            ]
            start = next(self._turns)
        for index in range(len(streams)):
            if streams[(start + index) % len(streams)].put(request):
                return True
        return False
