"""The producer's in-flight window: up to ``size`` requests sent before the oldest is answered
(Kafka's max.in.flight.requests.per.connection), and their answers taken back in the order the
requests were sent.

Why: with one request at a time a producer waits a whole round trip (the leader's replication
and group fsync) between requests, and the cluster sits half idle; several in flight keep it
busy, as the raw gRPC path with many outstanding requests does.

Rules this module keeps:
- ``send`` starts the request's whole retried attempt on a worker thread at once; the window
  holds it until ``oldest`` hands it back answered. Answers are handed back strictly in send
  order, whatever order they arrived in: what to do with a failure depends on what went
  before it (the producer decides, client/producer.py).
- ``on_answer`` is called (on a worker thread) as each answer arrives, so the producer's
  sender can wait for new batches and answers at once.
- ``send`` is never called on a full window; every wait is bounded by the attempt's own
  retry policy (its total timeout), so ``oldest`` and ``drain`` end.
- The worker threads are daemons and end with ``close``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from raftlog.client.errors import RaftlogError
from raftlog.client.messages import SendResult
from raftlog.client.outgoing_batch import Batch


@dataclass(slots=True)
class InFlight:
    """One request in the window: the batch sent (``request``: the members merged, or the one
    member), the queued batches it answers, and how many queue items it finishes."""

    request: Batch
    members: list[Batch]
    queue_items: int
    answer: Future[list[SendResult]]

    @property
    def results(self) -> list[SendResult]:
        """The answer's results (call once ``error`` is None)."""
        return self.answer.result()

    @property
    def error(self) -> RaftlogError | None:
        """The request's error, or None when it was stored; waits for the answer."""
        failure = self.answer.exception()
        if failure is None or isinstance(failure, RaftlogError):
            return failure
        # A bug must fail the request's futures, not the producer's sender thread.
        return RaftlogError(f"internal client error: {failure!r}")


class SendWindow:
    """At most ``size`` requests of one producer in flight, answered in order."""

    def __init__(
        self,
        attempt: Callable[[Batch], list[SendResult]],
        size: int,
        name: str,
        on_answer: Callable[[], None],
    ) -> None:
        if size < 1:
            raise ValueError(f"the window holds at least one request, not {size}")
        self.size = size
        self._attempt = attempt
        self._on_answer = on_answer
        self._entries: collections.deque[InFlight] = collections.deque()
        self._workers = ThreadPoolExecutor(max_workers=size, thread_name_prefix=name)

    def __len__(self) -> int:
        return len(self._entries)

    def full(self) -> bool:
        return len(self._entries) >= self.size

    def send(self, request: Batch, members: list[Batch], queue_items: int) -> None:
        """Start ``request`` (its sequence already given) on a worker."""
        if self.full():
            raise RuntimeError("send on a full window")
        answer: Future[Any] = self._workers.submit(self._attempt, request)
        self._entries.append(InFlight(request, members, queue_items, answer))
        answer.add_done_callback(lambda _: self._on_answer())

    def oldest_answered(self) -> bool:
        return bool(self._entries) and self._entries[0].answer.done()

    def oldest(self) -> InFlight:
        """The oldest request, once answered, out of the window."""
        entry = self._entries.popleft()
        entry.answer.exception()  # wait: bounded by the attempt's retry policy
        return entry

    def drain(self) -> list[InFlight]:
        """Every request still in the window, answered, in send order."""
        entries = []
        while self._entries:
            entries.append(self.oldest())
        return entries

    def close(self) -> None:
        self._workers.shutdown(wait=False)
