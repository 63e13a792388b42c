"""The shadow disk: current and synced states, sync, reset, compaction and snapshots."""

from __future__ import annotations

import pytest

from raftlog.raft.types import ConfState, Entry, HardState, SnapshotMeta

from .disk import LogState, SimDisk

CONF_STATE = ConfState(voters=("n1", "n2", "n3"))


def entries(first: int, last: int, term: int) -> list[Entry]:
    return [Entry(index, term, data=b"e%d" % index) for index in range(first, last + 1)]


def test_writes_reach_current_at_once_and_synced_at_sync() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 3, 1))
    disk.set_hard_state(HardState(term=1, vote="n1", commit=2))
    assert disk.current.last_index == 3 and disk.current.hard_state.vote == "n1"
    assert disk.synced.last_index == 0 and disk.unsynced_count() == 2
    disk.sync()
    assert disk.synced.last_index == 3 and disk.synced.hard_state == HardState(1, "n1", 2)


def test_append_truncates_a_conflicting_tail() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 5, 1))
    disk.append(entries(3, 3, 2))
    assert disk.current.last_index == 3 and disk.current.entry_at(3) == entries(3, 3, 2)[0]


def test_append_with_a_gap_is_a_contract_violation() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 2, 1))
    with pytest.raises(AssertionError, match="gap"):
        disk.append(entries(4, 4, 1))


def test_reset_replaces_both_states_with_what_was_recovered() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 6, 1))
    disk.sync()
    disk.append(entries(7, 8, 1))
    recovered = LogState(conf_state=CONF_STATE, entries=entries(1, 4, 1))
    disk.reset_to(recovered)
    assert disk.current.last_index == disk.synced.last_index == 4
    assert disk.unsynced_count() == 0
    assert disk.synced.take_changed_from() == 1, "the checkers re-chain the whole log"


def test_compaction_moves_entries_into_the_snapshot_image() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 5, 1))
    disk.compact(3, CONF_STATE)
    disk.sync()
    assert disk.current.snapshot == SnapshotMeta(3, 1, CONF_STATE)
    assert disk.current.snapshot_index == 3 and disk.current.last_index == 5
    assert disk.synced.entry_at(2) == entries(2, 2, 1)[0], "the image keeps the data"


def test_installing_a_snapshot_replaces_the_log() -> None:
    disk = SimDisk(CONF_STATE)
    disk.append(entries(1, 2, 1))
    image = tuple(entries(1, 4, 2))
    disk.apply_snapshot(SnapshotMeta(4, 2, CONF_STATE), image)
    assert (disk.current.snapshot_index, disk.current.last_index) == (4, 4)
    assert disk.current.image == list(image)
    disk.append(entries(5, 5, 2))
    assert disk.current.last_index == 5


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
