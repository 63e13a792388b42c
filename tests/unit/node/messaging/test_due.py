"""The delay scheduler's decisions from ConsumeQueue units (the tag field = delivery time)."""

from __future__ import annotations

from raftlog.node.messaging.due import BatchRoom, DueMessage, TimerHeap, due_run
from raftlog.store.consume_queue import ConsumeQueueUnit


def units(*deliver_ms: int, size_bytes: int = 100) -> list[ConsumeQueueUnit]:
    return [ConsumeQueueUnit(1000 * (i + 1), size_bytes, d) for i, d in enumerate(deliver_ms)]


def test_a_level_queue_delivers_its_due_run_and_stops_at_the_first_not_due() -> None:
    due, next_ms = due_run(
        4, 10, units(5, 6, 8, 7), now_ms=7, room=BatchRoom(9, 10**6), batch_empty=True
    )
    assert [(d.queue_offset, d.deliver_ms) for d in due] == [(10, 5), (11, 6)]
    assert next_ms == 8
    assert due[0] == DueMessage(5, 4, 10, 1000, 100)


def test_nothing_due_yet() -> None:
    due, next_ms = due_run(0, 0, units(50), now_ms=7, room=BatchRoom(9, 10**6), batch_empty=True)
    assert (due, next_ms) == ([], 50)


def test_the_room_bounds_a_batch_but_always_takes_one() -> None:
    room = BatchRoom(2, 10**6)
    due, next_ms = due_run(0, 0, units(1, 2, 3), now_ms=9, room=room, batch_empty=True)
    assert len(due) == 2 and next_ms is None and room.messages == 0
    big = BatchRoom(5, 50)
    due, _ = due_run(0, 0, units(1, 2), now_ms=9, room=big, batch_empty=True)
    assert len(due) == 1  # larger than the room, but the batch was empty
    due, _ = due_run(0, 0, units(1), now_ms=9, room=BatchRoom(5, 50), batch_empty=False)
    assert due == []


def test_the_timer_heap_delivers_by_time_not_arrival() -> None:
    heap = TimerHeap(64, term=3, scanned_to=20)
    heap.add(20, units(300, 100, 200, 50), done=(23,))
    assert heap.scanned_to == 24 and len(heap) == 3
    assert heap.next_deliver_ms() == 100
    due = heap.pop_due(now_ms=250, room=BatchRoom(9, 10**6), batch_empty=True)
    assert [(d.queue_offset, d.deliver_ms) for d in due] == [(21, 100), (22, 200)]
    assert heap.pop_due(now_ms=250, room=BatchRoom(9, 10**6), batch_empty=True) == []
    heap.add(24, units(10))
    assert [d.queue_offset for d in heap.pop_due(400, BatchRoom(9, 10**6), True)] == [24, 20]
