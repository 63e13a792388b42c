"""Orderly consumption's queue locks (node/messaging/queue_lock_table.py), driven by an
explicit clock: one holder per queue, renewal, expiry by lease only, unlock by the holder
only, release on leave, a new leader's wait of one lease, and the bound."""

from __future__ import annotations

import pytest

from raftlog.node.errors import OverloadedError
from raftlog.node.messaging.queue_lock_table import LockGrant, QueueLockTable

LEASE_S = 30.0


def leading_table(max_locks: int = 100) -> QueueLockTable:
    """A table whose leader took over long ago (its wait is over at 0.0)."""
    table = QueueLockTable(LEASE_S, max_locks)
    table.start_leadership(-LEASE_S)
    return table


def test_one_holder_per_queue() -> None:
    table = leading_table()
    assert table.lock("g", "t", [0, 1], "a", 0.0) == LockGrant([0, 1])
    assert table.lock("g", "t", [1, 2], "b", 1.0) == LockGrant([2])
    assert table.holder("g", "t", 1, 1.0) == "a"
    # Another group or topic is another lock.
    assert table.lock("h", "t", [1], "b", 1.0) == LockGrant([1])
    assert table.lock("g", "u", [1], "b", 1.0) == LockGrant([1])


def test_renewal_extends_the_lease_and_expiry_frees_the_queue() -> None:
    table = leading_table()
    table.lock("g", "t", [0], "a", 0.0)
    table.lock("g", "t", [0], "a", 20.0)  # renewed: held until 50
    assert table.lock("g", "t", [0], "b", 40.0).locked_queue_ids == []
    assert table.holder("g", "t", 0, 49.9) == "a"
    # Its lease ended (the holder died, or stopped renewing): another member takes it.
    assert table.lock("g", "t", [0], "b", 50.0).locked_queue_ids == [0]
    assert table.holder("g", "t", 0, 50.0) == "b"
    # The old holder cannot renew a lock it lost.
    assert table.lock("g", "t", [0], "a", 51.0).locked_queue_ids == []


def test_only_the_holder_unlocks() -> None:
    table = leading_table()
    table.lock("g", "t", [0, 1], "a", 0.0)
    assert table.unlock("g", "t", [0, 1, 2], "b") == []
    assert table.unlock("g", "t", [1, 2], "a") == [1]
    assert table.lock("g", "t", [1], "b", 1.0).locked_queue_ids == [1]
    assert table.holder("g", "t", 0, 1.0) == "a"


def test_a_leaving_member_releases_all_its_locks_in_its_group() -> None:
    table = leading_table()
    table.lock("g", "t", [0, 1], "a", 0.0)
    table.lock("g", "u", [0], "a", 0.0)
    table.lock("h", "t", [0], "a", 0.0)
    assert table.release_client("g", "a") == 3
    assert table.holder("g", "t", 0, 0.0) is None
    assert table.holder("h", "t", 0, 0.0) == "a"


def test_a_new_leader_grants_nothing_for_one_lease() -> None:
    table = QueueLockTable(LEASE_S, 100)
    table.start_leadership(100.0)
    grant = table.lock("g", "t", [0], "a", 100.0)
    assert grant.locked_queue_ids == [] and grant.retry_after_s == LEASE_S
    assert table.wait_s(120.0) == pytest.approx(10.0)
    assert table.lock("g", "t", [0], "a", 129.9).retry_after_s == pytest.approx(0.1)
    assert table.lock("g", "t", [0], "a", 130.0) == LockGrant([0])


def test_leadership_changes_forget_every_lock() -> None:
    table = leading_table()
    table.lock("g", "t", [0], "a", 0.0)
    table.stop_leadership()
    assert table.holder("g", "t", 0, 0.0) is None
    assert table.lock("g", "t", [0], "b", 1.0).locked_queue_ids == []
    table.start_leadership(1.0)
    assert len(table) == 0
    assert table.lock("g", "t", [0], "b", 1.0 + LEASE_S).locked_queue_ids == [0]


def test_the_table_is_bounded_and_ended_leases_make_room() -> None:
    table = leading_table(max_locks=2)
    table.lock("g", "t", [0, 1], "a", 0.0)
    with pytest.raises(OverloadedError, match="max_queue_locks"):
        table.lock("g", "t", [2], "b", 1.0)
    table.lock("g", "t", [0, 1], "a", 1.0)  # renewals need no room
    assert table.lock("g", "t", [2], "b", 31.0).locked_queue_ids == [2]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        QueueLockTable(0.0, 1)
    with pytest.raises(ValueError):
        QueueLockTable(1.0, 0)
