"""The Raft index: fixed-width units across files, a first index above 1, durable truncation
and compaction, reopening, placement, and recovery against the CommitLog."""

from __future__ import annotations

import pytest

from raftlog.node.replication.raft_entry import ENTRY_ENVELOPES, encode_entry
from raftlog.node.replication.raft_index import (
    UNIT_SIZE_BYTES,
    IndexUnit,
    RaftIndex,
    next_entry_position,
)
from raftlog.raft.types import EntryType
from raftlog.store.commit_log import CommitLog
from tests.support.sim_filesystem import SimFileSystem

DIRECTORY = "/s/raftindex"


def units(first_index: int, count: int) -> list[IndexUnit]:
    indexes = range(first_index, first_index + count)
    return [IndexUnit(index * 100, 40, index // 10 + 1) for index in indexes]


def test_units_span_files_and_survive_reopen() -> None:
    fs = SimFileSystem()
    index = RaftIndex(fs, DIRECTORY, 1, units_per_file=8)
    index.append(1, units(1, 30))
    index.sync()
    assert index.unit(17) == units(17, 1)[0]
    assert index.units(5, 20) == units(5, 15)
    assert fs.listdir(DIRECTORY) == [f"{n * 8 * UNIT_SIZE_BYTES:020d}" for n in range(4)]
    index.close()
    reopened = RaftIndex(fs, DIRECTORY, 1, units_per_file=8)
    assert (reopened.first_index, reopened.last_index) == (1, 30)
    assert reopened.units(1, 31) == units(1, 30)


def test_first_index_above_one_in_the_middle_of_a_file() -> None:
    fs = SimFileSystem()
    index = RaftIndex(fs, DIRECTORY, 1003, units_per_file=8)
    assert (index.first_index, index.last_index) == (1003, 1002)
    index.append(1003, units(1003, 10))
    assert index.units(1003, 1013) == units(1003, 10)
    with pytest.raises(IndexError):
        index.unit(1002)
    index.sync()
    index.close()
    reopened = RaftIndex(fs, DIRECTORY, 1003, units_per_file=8)
    assert (reopened.first_index, reopened.last_index) == (1003, 1012)


def test_truncate_is_durable_and_drops_later_files() -> None:
    fs = SimFileSystem()
    index = RaftIndex(fs, DIRECTORY, 1, units_per_file=8)
    index.append(1, units(1, 30))
    index.sync()
    index.truncate_from(10)
    assert index.last_index == 9
    assert len(fs.listdir(DIRECTORY)) == 2
    index.append(10, units(10, 2))
    assert index.units(8, 12) == units(8, 4)
    index.truncate_from(100)  # past the end: nothing happens
    assert index.last_index == 11


def test_compact_deletes_whole_files_below_the_first_index() -> None:
    fs = SimFileSystem()
    index = RaftIndex(fs, DIRECTORY, 1, units_per_file=8)
    index.append(1, units(1, 30))
    index.compact_to(18)
    assert (index.first_index, index.last_index) == (18, 30)
    assert len(fs.listdir(DIRECTORY)) == 2
    assert index.units(18, 31) == units(18, 13)
    index.reset(500)
    assert (index.first_index, index.last_index) == (500, 499)
    assert fs.listdir(DIRECTORY) == []


def test_placement_rolls_only_when_the_entry_does_not_fit() -> None:
    assert next_entry_position(90, 10, 100) == 90
    assert next_entry_position(91, 10, 100) == 100
    assert next_entry_position(100, 100, 100) == 100
    with pytest.raises(ValueError):
        next_entry_position(0, 101, 100)


def _log_with_entries(fs: SimFileSystem, count: int) -> tuple[CommitLog, list[IndexUnit]]:
    log = CommitLog(fs, "/s/commitlog", 512, envelopes=ENTRY_ENVELOPES)
    placed: list[IndexUnit] = []
    end = 0
    for log_index in range(1, count + 1):
        envelope = encode_entry(1 + log_index // 4, log_index, EntryType.NORMAL, b"")
        position = log.append(envelope)
        assert position == next_entry_position(end, len(envelope), 512)
        placed.append(IndexUnit(position, len(envelope), 1 + log_index // 4))
        end = position + len(envelope)
    log.flush()
    return log, placed


def test_recover_rebuilds_a_missing_tail_and_cuts_units_past_the_log() -> None:
    fs = SimFileSystem()
    log, placed = _log_with_entries(fs, 20)
    index = RaftIndex(fs, DIRECTORY, 1, units_per_file=8)
    index.append(1, placed[:5])
    index.recover(log, 0, 0)
    assert index.units(1, 21) == placed
    # Ahead: the CommitLog lost its tail; the units past it go.
    log.truncate_after(placed[11].physical_offset)
    index.recover(log, 0, 0)
    assert index.last_index == 11
    assert index.units(1, 12) == placed[:11]


def test_recover_drops_units_the_commit_log_contradicts() -> None:
    fs = SimFileSystem()
    log, placed = _log_with_entries(fs, 12)
    index = RaftIndex(fs, DIRECTORY, 1, units_per_file=8)
    wrong = [*placed[:10], IndexUnit(placed[10].physical_offset, placed[10].size_bytes, 99)]
    index.append(1, wrong)
    index.recover(log, 0, 0)
    assert index.units(1, 13) == placed
    # Zeros where units were (pages lost): cut there and rebuild.
    index.sync()
    fs.corrupt(f"{DIRECTORY}/{0:020d}", 3 * UNIT_SIZE_BYTES, bytes(UNIT_SIZE_BYTES * 2))
    index.close()
    reopened = RaftIndex(fs, DIRECTORY, 1, units_per_file=8)
    reopened.recover(log, 0, 0)
    assert reopened.units(1, 13) == placed
