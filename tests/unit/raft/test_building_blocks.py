"""Unit tests of the small parts: MemoryStorage, quorum arithmetic, Progress, Inflights."""

from __future__ import annotations

import pytest

from raftlog.raft import MemoryStorage, ProgressState
from raftlog.raft.membership import apply_change, refusal
from raftlog.raft.progress import Inflights, Progress
from raftlog.raft.quorum import VoteResult, committed_index, vote_result
from raftlog.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    LogCompactedError,
    LogUnavailableError,
    SnapshotMeta,
)

CONF = ConfState(voters=("a", "b", "c"))


def storage_with(*terms: int) -> MemoryStorage:
    storage = MemoryStorage(CONF)
    storage.append([Entry(i, t, data=b"%d" % i) for i, t in enumerate(terms, 1)])
    return storage


def test_memory_storage_append_replaces_conflicting_tail():
    storage = storage_with(1, 1, 1)
    storage.append([Entry(2, 2)])
    assert (storage.last_index(), storage.term(2)) == (2, 2)


def test_memory_storage_compact_keeps_term_of_snapshot_point():
    storage = storage_with(1, 2, 3, 3)
    storage.compact(2, CONF)
    assert (storage.first_index(), storage.last_index(), storage.term(2)) == (3, 4, 2)
    assert storage.snapshot() == SnapshotMeta(2, 2, CONF)
    with pytest.raises(LogCompactedError):
        storage.term(1)
    with pytest.raises(LogCompactedError):
        storage.entries(2, 4, 100)
    with pytest.raises(LogUnavailableError):
        storage.term(5)


def test_memory_storage_entries_respect_max_bytes_but_return_one():
    storage = storage_with(1, 1, 1, 1)
    assert [e.index for e in storage.entries(1, 5, 2)] == [1, 2]
    assert [e.index for e in storage.entries(1, 5, 0)] == [1]


def test_memory_storage_apply_snapshot_resets_log():
    storage = storage_with(1, 1)
    storage.apply_snapshot(SnapshotMeta(9, 4, CONF))
    assert (storage.first_index(), storage.last_index(), storage.term(9)) == (10, 9, 4)
    storage.append([Entry(10, 4)])
    assert storage.last_index() == 10


def test_committed_index_is_the_majority_match():
    assert committed_index(("a", "b", "c"), {"a": 5, "b": 3, "c": 1}) == 3
    assert committed_index(("a", "b", "c", "d"), {"a": 5, "b": 3, "c": 1, "d": 9}) == 3
    assert committed_index(("a",), {"a": 7}) == 7
    assert committed_index(("a", "b", "c"), {"a": 5}) == 0


def test_vote_result():
    voters = ("a", "b", "c")
    assert vote_result(voters, {"a": True}) == VoteResult.PENDING
    assert vote_result(voters, {"a": True, "b": True}) == VoteResult.WON
    assert vote_result(voters, {"a": True, "b": False, "c": False}) == VoteResult.LOST
    assert vote_result(voters, {"x": True, "y": True, "a": True}) == VoteResult.PENDING


def test_inflights_window():
    inflights = Inflights(2)
    inflights.add(3)
    inflights.add(5)
    assert inflights.full()
    inflights.free_le(4)
    assert inflights.count() == 1
    inflights.free_first_one()
    assert inflights.count() == 0


def test_progress_probe_and_replicate():
    progress = Progress(next_index=10, max_inflight_appends=4, is_learner=False)
    assert progress.state == ProgressState.PROBE
    progress.sent_entries(12)
    assert progress.is_paused()
    assert not progress.maybe_decrease_to(rejected_index=5, match_hint_index=2)  # stale
    assert progress.maybe_decrease_to(rejected_index=9, match_hint_index=4)
    assert (progress.next_index, progress.is_paused()) == (5, False)
    assert progress.maybe_update(6)
    progress.become_replicate()
    progress.sent_entries(8)
    progress.sent_entries(9)
    assert (progress.next_index, progress.inflights.count()) == (10, 2)
    assert not progress.maybe_update(5)


def test_membership_changes_apply_deterministically():
    start = ConfState(voters=("a", "b", "c"), learners=("d",))
    promoted = apply_change(start, ConfChange(ConfChangeType.ADD_VOTER, "d"))
    assert promoted == ConfState(voters=("a", "b", "c", "d"))
    removed = apply_change(promoted, ConfChange(ConfChangeType.REMOVE_NODE, "a"))
    assert removed == ConfState(voters=("b", "c", "d"))
    assert apply_change(removed, ConfChange(ConfChangeType.ADD_LEARNER, "b")) == removed
    assert refusal(start, ConfChange(ConfChangeType.ADD_VOTER, "d")) is None
    assert refusal(start, ConfChange(ConfChangeType.ADD_LEARNER, "d")) is not None
