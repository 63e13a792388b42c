"""Which pulled messages are still being consumed, per queue, and so which offset is safe to
commit: the push consumer's bookkeeping (RocketMQ's ProcessQueue, without the messages).

A push consumer hands messages to a thread pool, so they finish out of order. Committing the
position the puller reached would skip a message still in the listener (lost if the process
dies now); committing only up to the lowest unfinished message re-delivers at most the
window after it, never skips one. That is the at-least-once rule this module keeps:
- ``committable`` gives, per queue, the lowest offset started and not finished, or the
  puller's position when none is (past what the tag filter skipped, too).
- A queue's ``window`` counts the messages from its lowest unfinished one to its last
  started one (finished ones inside included): what a crash could re-deliver, and what the
  push consumer bounds by pausing the queue.
- Offsets are started in increasing order per queue (a queue is read in order), so the
  window is a deque and every operation is O(1) amortized.
- Thread-safe: listener threads finish, the puller starts and reads; ``wait_for_change``
  wakes the puller when a finish makes room.
- A queue given up on a rebalance is ``forget``-ten: its window goes, and its generation
  moves on, so a message of the old one that finishes later (``finish`` with the generation
  ``start`` gave) changes nothing, even once the queue is read again from an offset the old
  message shares.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping


class InFlightOffsets:
    """Per queue id: the offsets started and not yet all finished (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # queue id -> started offsets from the lowest unfinished one on, in order.
        self._windows: dict[int, deque[int]] = {}
        # queue id -> finished offsets still inside the window (behind an unfinished one).
        self._finished: dict[int, set[int]] = {}
        self._last_started: dict[int, int] = {}
        self._in_flight = 0
        # queue id -> how many times it was forgotten (given up).
        self._generations: dict[int, int] = {}

    def start(self, queue_id: int, offset: int) -> int:
        """``offset`` of ``queue_id`` is handed to the listener. Offsets must increase.
        Returns the queue's generation, for ``finish`` and ``current``."""
        with self._lock:
            last = self._last_started.get(queue_id)
            if last is not None and offset <= last:
                raise ValueError(
                    f"queue {queue_id}: offset {offset} started after {last}; offsets must increase"
                )
            self._last_started[queue_id] = offset
            self._windows.setdefault(queue_id, deque()).append(offset)
            self._finished.setdefault(queue_id, set())
            self._in_flight += 1
            return self._generations.get(queue_id, 0)

    def finish(self, queue_id: int, offset: int, generation: int | None = None) -> None:
        """``offset`` of ``queue_id`` is done (consumed, or handed to the retry topic).
        With the ``generation`` it was started in, a message of a forgotten queue is ignored."""
        with self._changed:
            if generation is not None and generation != self._generations.get(queue_id, 0):
                return
            window = self._windows.get(queue_id)
            finished = self._finished.get(queue_id, set())
            if not window or offset < window[0] or offset in finished:
                raise ValueError(f"queue {queue_id}: offset {offset} is not in flight")
            if offset > self._last_started[queue_id]:
                raise ValueError(f"queue {queue_id}: offset {offset} was never started")
            finished.add(offset)
            self._in_flight -= 1
            # Drop the finished prefix: the window starts at the lowest unfinished offset.
            while window and window[0] in finished:
                finished.discard(window.popleft())
            self._changed.notify_all()

    def current(self, queue_id: int, generation: int) -> bool:
        """Whether ``generation`` of ``queue_id`` is still the one read (not forgotten)."""
        with self._lock:
            return generation == self._generations.get(queue_id, 0)

    def forget(self, queue_ids: Iterable[int]) -> None:
        """These queues were given up: drop their windows (see the module docstring)."""
        with self._changed:
            for queue_id in queue_ids:
                window = self._windows.pop(queue_id, deque())
                self._in_flight -= len(window) - len(self._finished.pop(queue_id, ()))
                self._last_started.pop(queue_id, None)
                self._generations[queue_id] = self._generations.get(queue_id, 0) + 1
            self._changed.notify_all()

    def committable(self, positions: Mapping[int, int]) -> dict[int, int]:
        """Queue id -> the offset to commit: its lowest unfinished offset, or ``positions``'
        (the puller's next offset) when nothing of that queue is in flight."""
        with self._lock:
            return {
                queue_id: self._windows[queue_id][0] if self._windows.get(queue_id) else position
                for queue_id, position in positions.items()
            }

    def window(self, queue_id: int) -> int:
        """Messages from ``queue_id``'s lowest unfinished one to its last started one."""
        with self._lock:
            return len(self._windows.get(queue_id, ()))

    def in_flight(self, queue_id: int | None = None) -> int:
        """Messages started and not finished, of one queue or of all."""
        with self._lock:
            if queue_id is None:
                return self._in_flight
            window = self._windows.get(queue_id, ())
            return len(window) - len(self._finished.get(queue_id, ()))

    def wait_for_change(self, timeout_s: float) -> None:
        """Wait until a message finishes, or ``timeout_s``."""
        with self._changed:
            self._changed.wait(max(0.0, timeout_s))
