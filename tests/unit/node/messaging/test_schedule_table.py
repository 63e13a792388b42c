"""The scheduler's replicated progress: applied in log order on every replica, idempotent."""

from __future__ import annotations

import pytest

from raftlog.node.control import CommitOffsets, ScheduleProgress, control_message, decode_command
from raftlog.node.messaging.schedule_table import SCHEDULE_GROUP, ScheduleTable, store_offsets


def test_level_queue_progress_is_a_watermark() -> None:
    table = ScheduleTable()
    table.apply(ScheduleProgress(((0, 5, ()), (2, 1, ()))))
    table.apply(ScheduleProgress(((0, 3, ()),)))  # an older record replayed: no step back
    assert (table.low(0), table.low(2), table.low(1)) == (5, 1, 0)


def test_timer_queue_progress_keeps_out_of_order_deliveries() -> None:
    table = ScheduleTable()
    table.apply(ScheduleProgress(((64, 0, (2, 5)),)))
    assert table.progress(64) == (0, frozenset({2, 5}))
    # Offsets 0, 1 delivered: low moves over 0..2 and stops at 3.
    low, delivered = table.low_after(64, (0, 1), at_least=0, end=10)
    assert (low, delivered) == (3, ())
    table.apply(ScheduleProgress(((64, low, delivered),)))
    assert table.progress(64) == (3, frozenset({5}))
    table.apply(ScheduleProgress(((64, low, delivered),)))  # replayed: the same
    assert table.progress(64) == (3, frozenset({5}))


def test_low_starts_at_the_first_live_offset_and_stops_at_the_end() -> None:
    table = ScheduleTable()
    assert table.low_after(64, (7, 9), at_least=7, end=8) == (8, (9,))
    assert table.low_after(3, (), at_least=4, end=10) == (4, ())


def test_the_progress_record_round_trips() -> None:
    command = ScheduleProgress(((0, 12, ()), (64, 3, (5, 9))))
    assert decode_command(control_message(command).body) == command
    with pytest.raises(ValueError):
        decode_command(b'{"v":1,"op":"schedule_progress","queues":[[1]]}')


def test_each_low_is_mirrored_as_the_schedule_groups_offset() -> None:
    mirror = store_offsets(ScheduleProgress(((0, 12, ()), (64, 3, (5, 9)))))
    assert mirror == CommitOffsets(
        SCHEDULE_GROUP, (("SCHEDULE_TOPIC_XXXX", 0, 12), ("SCHEDULE_TOPIC_XXXX", 64, 3))
    )
    assert SCHEDULE_GROUP.startswith("__raftlog")  # no client may commit to it
