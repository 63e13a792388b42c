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
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping


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

    def start(self, queue_id: int, offset: int) -> None:
        """``offset`` of ``queue_id`` is handed to the listener. Offsets must increase."""
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

    def finish(self, queue_id: int, offset: int) -> None:
        """``offset`` of ``queue_id`` is done (consumed, or handed to the retry topic)."""
        with self._changed:
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
