"""The simulated disk: LogStorage answers, sync, crash and torn writes, snapshots."""

from __future__ import annotations

import random

import pytest

from raftlog.raft.types import (
    ConfState,
    Entry,
    HardState,
    LogCompactedError,
    LogUnavailableError,
    SnapshotMeta,
)

from .disk import SimDisk

CONF_STATE = ConfState(voters=("n1", "n2", "n3"))


def entries(first: int, last: int, term: int) -> list[Entry]:
    return [Entry(index, term, data=b"e%d" % index) for index in range(first, last + 1)]


def test_reads_see_unsynced_writes() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 3, 1))
    disk.set_hard_state(HardState(term=1, vote="n1", commit=2))
    assert (disk.first_index(), disk.last_index()) == (1, 3)
    assert disk.term(0) == 0 and disk.term(3) == 1
    assert disk.initial_state() == (HardState(1, "n1", 2), CONF_STATE)
    assert disk.synced.last_index == 0


def test_entries_respects_bounds_and_max_bytes() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 5, 1))
    assert [entry.index for entry in disk.entries(2, 5, 1 << 20)] == [2, 3, 4]
    assert [entry.index for entry in disk.entries(2, 5, 0)] == [2], "at least one entry"
    with pytest.raises(LogUnavailableError):
        disk.entries(2, 7, 1 << 20)
    with pytest.raises(LogUnavailableError):
        disk.term(6)


def test_append_truncates_a_conflicting_tail() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 5, 1))
    disk.append(entries(3, 3, 2))
    assert disk.last_index() == 3 and disk.term(3) == 2


def test_append_with_a_gap_is_a_contract_violation() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 2, 1))
    with pytest.raises(AssertionError, match="gap"):
        disk.append(entries(4, 4, 1))


def test_crash_loses_unsynced_writes() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 2, 1))
    disk.set_hard_state(HardState(term=1, vote="n1"))
    disk.sync()
    disk.append(entries(3, 6, 1))
    disk.set_hard_state(HardState(term=2, vote="n2"))
    assert disk.crash(random.Random(0), torn=False) == 0
    assert disk.last_index() == 2
    assert disk.initial_state()[0] == HardState(term=1, vote="n1")
    assert disk.unsynced_count() == 0


def test_torn_crash_keeps_a_prefix_of_the_unsynced_writes() -> None:
    kept_lengths = set()
    for seed in range(40):
        disk = SimDisk(CONF_STATE)
        disk.append(entries(1, 1, 1))
        disk.sync()
        disk.append(entries(2, 6, 1))
        disk.crash(random.Random(seed), torn=True)
        last_index = disk.last_index()
        kept_lengths.add(last_index)
        # Whatever survived is synced, contiguous and equal to what was written.
        assert disk.synced.last_index == last_index
        assert [disk.synced.entry_at(i) for i in range(1, last_index + 1)] == entries(
            1, last_index, 1
        )
    assert kept_lengths == {1, 2, 3, 4, 5, 6}, "every cut point, including inside the append"


def test_compaction_moves_entries_into_the_snapshot_image() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 5, 1))
    disk.compact(3, CONF_STATE)
    disk.sync()
    assert disk.first_index() == 4 and disk.term(3) == 1
    assert disk.snapshot() == SnapshotMeta(3, 1, CONF_STATE)
    with pytest.raises(LogCompactedError):
        disk.term(2)
    with pytest.raises(LogCompactedError):
        disk.entries(3, 5, 1 << 20)
    assert disk.synced.entry_at(2) == entries(2, 2, 1)[0], "the image keeps the data"


def test_installing_a_snapshot_replaces_the_log() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 2, 1))
    image = tuple(entries(1, 4, 2))
    disk.apply_snapshot(SnapshotMeta(4, 2, CONF_STATE), image)
    assert (disk.first_index(), disk.last_index()) == (5, 4)
    assert disk.current.image == list(image)
    disk.append(entries(5, 5, 2))
    assert disk.last_index() == 5


def test_changed_from_index_tracks_the_lowest_durable_change() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 5, 1))
    disk.sync()
    assert disk.synced.take_changed_from() == 1
    assert disk.synced.take_changed_from() is None
    disk.append(entries(4, 4, 2))
    assert disk.synced.take_changed_from() is None, "nothing durable changed yet"
    disk.sync()
    assert disk.synced.take_changed_from() == 4
