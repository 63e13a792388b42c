"""RaftLogStorage on a full disk: an append the disk refuses part way (ENOSPC in a CommitLog
run, across a segment roll, or in the Raft index) appends nothing, leaves the files as they
were (a reopen finds the same log), and the same entries append once space is back."""

from __future__ import annotations

import pytest

from raftlog.node.replication.raft_log_storage import RAFT_INDEX_DIR, RaftLogStorage
from raftlog.raft.types import Entry, HardState
from raftlog.store.errors import DiskFullError
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.node.replication.entry_factory import LeaderLog
from tests.unit.node.replication.test_raft_log_storage import (
    SEGMENT_SIZE_BYTES,
    all_entries,
    open_storage,
    specs,
)

ROOT = "/node"


def directory_bytes(fs: SimFileSystem, directory: str) -> dict[str, bytes]:
    return {name: fs.read_bytes(f"{directory}/{name}") for name in fs.listdir(directory)}


def files_of(fs: SimFileSystem) -> dict[str, dict[str, bytes]]:
    return {sub: directory_bytes(fs, f"{ROOT}/{sub}") for sub in ("commitlog", RAFT_INDEX_DIR)}


def commit_log_growth(base: list[Entry], more: list[Entry]) -> int:
    """Bytes the CommitLog files grow by when ``more`` is appended after ``base``."""
    fs = SimFileSystem()
    storage = open_storage(fs)
    storage.append(base)
    before = sum(len(data) for data in directory_bytes(fs, f"{ROOT}/commitlog").values())
    storage.append(more)
    return sum(len(data) for data in directory_bytes(fs, f"{ROOT}/commitlog").values()) - before


def refused_then_taken(
    storage: RaftLogStorage, fs: SimFileSystem, entries: list[Entry], room_bytes: int
) -> None:
    """Append ``entries`` with ``room_bytes`` of space left: refused, nothing changed; then
    with space: taken."""
    before_entries, before_files = all_entries(storage), files_of(fs)
    last_index, last_term = storage.last_index(), storage.term(storage.last_index())
    end = storage.log_end_physical_offset
    fs.capacity_bytes = fs.used_bytes() + room_bytes
    with pytest.raises(DiskFullError):
        storage.append(entries)
    assert (storage.last_index(), storage.term(storage.last_index())) == (last_index, last_term)
    assert storage.log_end_physical_offset == storage.commit_log.max_offset == end
    assert all_entries(storage) == before_entries
    assert files_of(fs) == before_files
    fs.capacity_bytes = None
    storage.append(entries)
    assert all_entries(storage) == before_entries + entries


@pytest.mark.parametrize("room_bytes", [0, 30, 300, 900])
def test_a_refused_append_across_segment_rolls_keeps_nothing(room_bytes: int) -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    storage.append(leader.entries(1, 1, specs(10)))
    storage.sync()
    more = leader.entries(11, 1, specs(12, seed=3))  # rolls at least one segment
    refused_then_taken(storage, fs, more, room_bytes)
    storage.close()
    assert all_entries(open_storage(fs))[10:] == more


def test_a_refused_index_append_cuts_the_entries_back_out_of_the_commit_log() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    base = leader.entries(1, 1, specs(10))
    storage.append(base)
    more = leader.entries(11, 1, specs(3, seed=4))
    # The CommitLog's bytes fit; the index units (20 bytes each) do not.
    refused_then_taken(storage, fs, more, commit_log_growth(base, more) + 10)


def test_a_refused_replacement_of_a_stale_tail_leaves_the_log_before_it() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    storage.append(leader.entries(1, 1, specs(10)))
    storage.set_hard_state(HardState(2, "b", 5))
    replacement = leader.entries(7, 2, specs(4, seed=6))
    fs.capacity_bytes = fs.used_bytes()
    with pytest.raises(DiskFullError):
        storage.append(replacement)
    # The stale tail went (durably, before the write); what is left ends at entry 6.
    assert storage.last_index() == 6 and storage.term(6) == 1
    assert storage.log_end_physical_offset == storage.commit_log.max_offset
    fs.capacity_bytes = None
    storage.append(replacement)
    storage.close()
    assert all_entries(open_storage(fs))[6:] == replacement
