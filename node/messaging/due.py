"""The delay scheduler's decisions, from ConsumeQueue units alone (a schedule unit's tag field
holds its delivery time, store/hashing.py): which messages are due now.

- A level queue is in delivery-time order (one delay, messages appended in time order), so
  its due messages are the run from its ``low`` offset up to the first one not yet due.
- The timer queue (``deliver_at_ms``) is in arrival order, so the leader keeps its pending
  messages in a heap by delivery time (``TimerHeap``), built from the queue's units when it
  becomes leader and extended with each new unit; due messages come off its top.

Rules this module keeps: pure (no clock, no store: units and the time come from the caller);
a message is due when its delivery time is at or before now; batches are bounded by a count
and a byte size, and always hold at least one due message when one is due.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from raftlog.store.consume_queue import ConsumeQueueUnit


@dataclass(frozen=True, slots=True, order=True)
class DueMessage:
    """A schedule record to deliver, and where it lies."""

    deliver_ms: int
    queue_id: int
    queue_offset: int
    physical_offset: int
    size_bytes: int


@dataclass(slots=True)
class BatchRoom:
    """What a delivery batch may still take."""

    messages: int
    size_bytes: int

    def takes(self, size_bytes: int, batch_empty: bool) -> bool:
        """Whether a message of ``size_bytes`` fits (the first one always does)."""
        if self.messages <= 0 or (not batch_empty and size_bytes > self.size_bytes):
            return False
        self.messages -= 1
        self.size_bytes -= size_bytes
        return True


def due_run(
    queue_id: int,
    first_offset: int,
    units: Sequence[ConsumeQueueUnit],
    now_ms: int,
    room: BatchRoom,
    batch_empty: bool,
) -> tuple[list[DueMessage], int | None]:
    """A level queue's due messages among ``units`` (read from ``first_offset``), in order,
    up to the first not yet due or the room's end; and that first one's delivery time (None
    when every unit read was due or the room ran out)."""
    due: list[DueMessage] = []
    for index, (physical_offset, size_bytes, deliver_ms) in enumerate(units):
        if deliver_ms > now_ms:
            return due, deliver_ms
        if not room.takes(size_bytes, batch_empty and not due):
            return due, None
        due.append(
            DueMessage(deliver_ms, queue_id, first_offset + index, physical_offset, size_bytes)
        )
    return due, None


class TimerHeap:
    """The timer queue's pending messages by delivery time, for one leader term."""

    def __init__(self, queue_id: int, term: int, scanned_to: int) -> None:
        self.queue_id = queue_id
        self.term = term
        # Every unit below this offset was looked at (pushed, or done already).
        self.scanned_to = scanned_to
        self._heap: list[DueMessage] = []

    def __len__(self) -> int:
        return len(self._heap)

    def add(
        self, first_offset: int, units: Sequence[ConsumeQueueUnit], done: Iterable[int] = ()
    ) -> None:
        """The units read from ``first_offset`` (which must be ``scanned_to``), but those whose
        offsets are in ``done`` (delivered already)."""
        assert first_offset == self.scanned_to, (first_offset, self.scanned_to)
        skipped = frozenset(done)
        for index, (physical_offset, size_bytes, deliver_ms) in enumerate(units):
            offset = first_offset + index
            if offset not in skipped:
                heapq.heappush(
                    self._heap,
                    DueMessage(deliver_ms, self.queue_id, offset, physical_offset, size_bytes),
                )
        self.scanned_to = first_offset + len(units)

    def next_deliver_ms(self) -> int | None:
        return self._heap[0].deliver_ms if self._heap else None

    def pop_due(self, now_ms: int, room: BatchRoom, batch_empty: bool) -> list[DueMessage]:
        """The due messages, earliest first, as many as the room takes."""
        due: list[DueMessage] = []
        heap = self._heap
        while heap and heap[0].deliver_ms <= now_ms:
            if not room.takes(heap[0].size_bytes, batch_empty and not due):
                break
            due.append(heapq.heappop(heap))
        return due
