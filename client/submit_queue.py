"""The producer's submission queue: callers put batches one at a time, the sender thread takes
everything queued in one go.

Why not ``queue.Queue``: it takes its lock (and a condition's) once per item on both sides,
and a ``task_done`` per item; with one caller thread putting and the sender taking, that lock
was contended on every message and cost the producer more CPU than building the message.

Rules this module keeps:
- FIFO: ``take_all`` returns the items in the order they were put.
- Bounded by unfinished items (put and not yet ``finished``: queued, being coalesced, or in
  flight), not only queued ones: ``put`` waits up to its timeout for room, then raises
  ``queue.Full``.
- ``unfinished`` is 0 exactly when everything put has been finished.
- ``wake`` makes the taker's wait (or its next one) return, empty-handed if nothing is
  queued: the sender waits for "a batch to send or an answer to take" in one place.
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class SubmitQueue(Generic[T]):
    def __init__(self, max_unfinished: int) -> None:
        if max_unfinished < 1:
            raise ValueError(f"max_unfinished is {max_unfinished}; it must be at least 1")
        self.max_unfinished = max_unfinished
        self._items: collections.deque[T] = collections.deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._room = threading.Condition(self._lock)
        self._unfinished = 0
        # Notify only a waiter that is there: a notify costs even with nobody waiting.
        self._taker_waiting = False
        self._putters_waiting = 0
        self._woken = False

    def put(self, item: T, timeout_s: float | None = None) -> None:
        with self._lock:
            if self._unfinished >= self.max_unfinished:
                self._putters_waiting += 1
                try:
                    has_room = self._room.wait_for(
                        lambda: self._unfinished < self.max_unfinished, timeout_s
                    )
                finally:
                    self._putters_waiting -= 1
                if not has_room:
                    raise queue.Full
            self._items.append(item)
            self._unfinished += 1
            if self._taker_waiting:
                self._ready.notify()

    def take_all(self, block: bool = True) -> list[T]:
        """Everything queued, oldest first; when ``block``, waits for at least one item or a
        ``wake``."""
        with self._lock:
            while block and not self._items and not self._woken:
                self._taker_waiting = True
                try:
                    self._ready.wait()
                finally:
                    self._taker_waiting = False
            self._woken = False
            items = list(self._items)
            self._items.clear()
            return items

    def wake(self) -> None:
        with self._lock:
            self._woken = True
            if self._taker_waiting:
                self._ready.notify()

    def finished(self, count: int) -> None:
        """``count`` items taken earlier are done with: room for as many new ones."""
        if count <= 0:
            return
        with self._lock:
            self._unfinished -= count
            if self._putters_waiting:
                self._room.notify(count)

    def empty(self) -> bool:
        """Nothing queued (taken items may still be unfinished)."""
        return not self._items

    def queued(self) -> int:
        return len(self._items)

    def unfinished(self) -> int:
        return self._unfinished
