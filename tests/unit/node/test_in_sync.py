"""InSyncSet and MasterState: RocketMQ's in-sync rules, the confirmed offset, and the honest
SYNC_MASTER answers (SEND_OK, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT)."""

from __future__ import annotations

import threading
import time

import pytest

from raftlog.node.masterslave.in_sync import InSyncSet
from raftlog.node.masterslave.master_state import (
    FLUSH_SLAVE_TIMEOUT,
    SEND_OK,
    SLAVE_NOT_AVAILABLE,
    MasterState,
)


def test_a_slave_is_in_sync_once_it_held_what_it_was_sent() -> None:
    group = InSyncSet(needed=2, max_gap_bytes=1000, max_lag_ms=500)
    group.report("s1", 0, sent_end_offset=100, sent_at_ms=0)
    assert group.in_sync(100, now_ms=0) == []  # connected, never caught up
    group.report("s1", 100, sent_end_offset=100, sent_at_ms=10)
    assert group.in_sync(150, now_ms=20) == ["s1"]
    assert group.confirmed_offset(150, now_ms=20) == 100
    # Behind for longer than max_lag_ms since it last caught up: out.
    assert group.in_sync(150, now_ms=600) == []
    assert group.confirmed_offset(150, now_ms=600) == 0
    # Too many bytes behind: out at once.
    assert group.in_sync(1101, now_ms=20) == []


def test_the_confirmed_offset_is_the_needed_th_highest_holding() -> None:
    group = InSyncSet(needed=3, max_gap_bytes=10_000, max_lag_ms=10_000)
    for node_id, held in (("a", 300), ("b", 200), ("c", 100)):
        group.report(node_id, held, sent_end_offset=held, sent_at_ms=0)
    assert group.confirmed_offset(400, now_ms=1) == 200
    group.disconnect("a")
    assert group.confirmed_offset(400, now_ms=1) == 100
    assert [lag.node_id for lag in group.lags(400, now_ms=1)] == ["b", "c"]
    assert group.lags(400, now_ms=1)[0].lag_bytes == 200


def test_reports_never_move_an_ack_backwards() -> None:
    group = InSyncSet(needed=2, max_gap_bytes=10_000, max_lag_ms=10_000)
    group.report("a", 500, 500, 0)
    group.report("a", 100, 500, 1)
    assert group.lags(500, now_ms=2)[0].acked_offset == 500
    with pytest.raises(ValueError):
        InSyncSet(needed=0, max_gap_bytes=1, max_lag_ms=1)


def test_a_sync_master_answers_each_case_honestly() -> None:
    end = [1000]
    state = MasterState(InSyncSet(2, 10_000, 10_000), lambda: end[0], synchronous=True)
    assert state.wait_replicated(1000, timeout_s=0.1) == SLAVE_NOT_AVAILABLE
    state.slave_reported("s1", 900, sent_end_offset=900, sent_at_ms=state.now_ms())
    started = time.monotonic()
    assert state.wait_replicated(1000, timeout_s=0.2) == FLUSH_SLAVE_TIMEOUT
    assert time.monotonic() - started >= 0.2

    def ack_later() -> None:
        time.sleep(0.05)
        state.slave_reported("s1", 1000, sent_end_offset=1000, sent_at_ms=state.now_ms())

    threading.Thread(target=ack_later).start()
    assert state.wait_replicated(1000, timeout_s=5) == SEND_OK
    assert state.confirmed_offset() == 1000
    state.close()
    assert state.wait_replicated(2000, timeout_s=5) == FLUSH_SLAVE_TIMEOUT  # at once


def test_an_async_master_never_waits() -> None:
    state = MasterState(InSyncSet(1, 1, 1), lambda: 5, synchronous=False)
    assert state.wait_replicated(10**9, timeout_s=10) == SEND_OK
    assert state.confirmed_offset() == 5


def test_the_in_sync_set_a_master_proposes() -> None:
    # A SYNC_MASTER proposes only slaves holding everything confirmed; an ASYNC_MASTER, whose
    # own end is confirmed at once, proposes every slave within the lag bounds: otherwise a
    # slave of a log that keeps growing would never be in the set, and the controller could
    # never replace the master.
    for synchronous, expected in ((True, {"m", "s1"}), (False, {"m", "s1", "s2"})):
        state = MasterState(
            InSyncSet(2, 10_000, 10_000), lambda: 1000, synchronous=synchronous, now_ms=lambda: 0
        )
        state.set_agreed("m", frozenset({"m", "s1"}))
        state.slave_reported("s1", 1000, sent_end_offset=1000, sent_at_ms=0)
        state.slave_reported("s2", 990, sent_end_offset=990, sent_at_ms=0)
        assert state.proposed_in_sync("m") == expected


def test_a_record_is_election_safe_once_the_whole_in_sync_set_holds_it() -> None:
    static = MasterState(InSyncSet(2, 10_000, 10_000), lambda: 1000, synchronous=True)
    assert static.election_safe(1000)  # no controller, no election
    state = MasterState(InSyncSet(3, 10_000, 10_000), lambda: 1000, synchronous=True)
    state.set_agreed("m", frozenset({"m"}))
    assert state.election_safe(1000)  # only the master itself could be elected
    state.set_agreed("m", frozenset({"m", "s1"}))
    state.slave_reported("s1", 900, sent_end_offset=900, sent_at_ms=state.now_ms())
    assert not state.election_safe(1000)  # s1 could be elected without it
    state.slave_reported("s1", 1000, sent_end_offset=1000, sent_at_ms=state.now_ms())
    assert state.election_safe(1000)  # though fewer than min_in_sync_replicas (3) hold it
