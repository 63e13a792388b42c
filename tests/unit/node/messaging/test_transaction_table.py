"""The leader's transaction table: decisions and check counts from op records, what is due,
and the watermarks that only move over decided halves."""

from __future__ import annotations

import pytest

from raftlog.node.messaging.transaction import (
    OP_CHECK,
    OP_COMMIT,
    OP_ROLLBACK,
    HalfMessage,
    OpRecord,
)
from raftlog.node.messaging.transaction_table import TransactionSettings, TransactionTable

SETTINGS = TransactionSettings(timeout_ms=1_000, check_interval_ms=500, check_max=2)


def half(offset: int, stored_ms: int = 0, *, valid: bool = True) -> HalfMessage:
    return HalfMessage(offset, 100 * offset, stored_ms, f"TX{offset}", "g", "orders", 0, valid)


def op(half_offset: int, kind: str, times: int = 0, stored_ms: int = 0) -> OpRecord:
    return OpRecord(half_offset, kind, times, stored_ms)


def table_with(halves: int, ops: list[OpRecord]) -> TransactionTable:
    table = TransactionTable(term=1, half_low=0, op_low=0)
    for offset, record in enumerate(ops):
        table.add_op(offset, record)
    for offset in range(halves):
        table.add_half(half(offset))
    return table


def test_the_first_decision_is_the_decision() -> None:
    table = table_with(2, [op(0, OP_COMMIT), op(0, OP_ROLLBACK), op(1, OP_CHECK, 1)])
    assert table.decision(0) == OP_COMMIT
    assert table.decision(1) is None
    assert table.check_times(1) == 1
    assert table.undecided_count() == 1


def test_records_must_come_in_order() -> None:
    table = TransactionTable(term=1, half_low=0, op_low=0)
    with pytest.raises(ValueError):
        table.add_op(1, op(0, OP_COMMIT))
    with pytest.raises(ValueError):
        table.add_half(half(1))


def test_due_checks_then_rolls_back_after_the_last_check() -> None:
    table = table_with(1, [])
    assert not table.due(999, SETTINGS, limit=10)  # younger than the timeout
    work = table.due(1_000, SETTINGS, limit=10)
    assert [(h.queue_offset, times) for h, times in work.checks] == [(0, 1)]
    table.add_op(0, op(0, OP_CHECK, 1, stored_ms=1_000))
    assert not table.due(1_499, SETTINGS, limit=10)  # within the check interval
    assert [t for _, t in table.due(1_500, SETTINGS, limit=10).checks] == [2]
    table.add_op(1, op(0, OP_CHECK, 2, stored_ms=1_500))
    work = table.due(2_000, SETTINGS, limit=10)
    assert (work.checks, [h.queue_offset for h in work.rollbacks]) == ([], [0])


def test_due_skips_busy_halves_stops_at_young_ones_and_rolls_back_malformed_ones() -> None:
    table = TransactionTable(term=1, half_low=0, op_low=0)
    table.add_half(half(0, 0, valid=False))
    table.add_half(half(1, 0))
    table.add_half(half(2, 5_000))
    table.add_half(half(3, 0))
    work = table.due(1_000, SETTINGS, limit=10, busy={1})
    assert [h.queue_offset for h in work.rollbacks] == [0]
    assert work.checks == []  # 1 is busy; 2 is young, and nothing after it is looked at
    assert len(table.due(1_000, SETTINGS, limit=1).rollbacks) == 1


def test_watermarks_move_only_over_decided_halves() -> None:
    table = table_with(4, [op(1, OP_COMMIT), op(0, OP_CHECK, 1), op(0, OP_ROLLBACK)])
    assert table.advance()
    assert (table.half_low, table.op_low) == (2, 3)  # no op names a half at or above 2
    table.add_op(3, op(3, OP_COMMIT))
    table.add_op(4, op(2, OP_CHECK, 1))
    assert not table.advance()
    assert (table.half_low, table.op_low) == (2, 3)  # 2 is undecided; op 3 names 3
    table.add_op(5, op(2, OP_ROLLBACK))
    assert table.advance()
    assert (table.half_low, table.op_low) == (4, 6)
    assert not table.advance()


def test_a_new_leader_starts_at_the_watermarks_and_ignores_older_ops() -> None:
    table = TransactionTable(term=2, half_low=5, op_low=7)
    table.add_op(7, op(3, OP_COMMIT))  # names a half below the watermark
    table.add_op(8, op(6, OP_COMMIT))
    table.add_half(half(5))
    table.add_half(half(6))
    assert table.decision(3) is None
    assert table.decision(6) == OP_COMMIT
    assert table.undecided_count() == 1


def test_retention_moves_the_watermark_past_deleted_halves() -> None:
    table = table_with(2, [])
    table.skip_halves_to(5)
    table.skip_ops_to(3)
    assert (table.half_low, table.half_scanned_to, table.op_scanned_to) == (5, 5, 3)
    assert table.undecided_count() == 0
