"""RaftLogStorage: restarts, torn tails, an index ahead of or behind the CommitLog, conflict
truncation, byte-identical replicas across segment rolls, planning, snapshots, retention."""

from __future__ import annotations

import hashlib
import random

import pytest

from raftlog.node.replication.hard_state_file import CorruptStateFileError
from raftlog.node.replication.raft_log_storage import RAFT_INDEX_DIR, RaftLogStorage
from raftlog.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    LogCompactedError,
    SnapshotMeta,
)
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.node.replication.entry_factory import LeaderLog, payload_at, planned_entry

SEGMENT_SIZE_BYTES = 1024
BOOTSTRAP = ConfState(voters=("a", "b", "c"))
CONF = ConfChange(ConfChangeType.ADD_VOTER, "d").encode()


def open_storage(fs: SimFileSystem, root: str = "/node") -> RaftLogStorage:
    return RaftLogStorage.open(
        fs,
        root,
        segment_size_bytes=SEGMENT_SIZE_BYTES,
        bootstrap=BOOTSTRAP,
        index_units_per_file=8,
    )


def specs(count: int, seed: int = 0) -> list[list[bytes] | bytes]:
    rng = random.Random(seed)
    return [
        CONF
        if n % 7 == 6
        else [rng.randbytes(rng.randint(0, 120)) for _ in range(rng.randint(0, 3))]
        for n in range(count)
    ]


def all_entries(storage: RaftLogStorage) -> list[Entry]:
    return storage.entries(storage.first_index(), storage.last_index() + 1, 1 << 30)


def segment_digests(fs: SimFileSystem, root: str) -> dict[str, str]:
    directory = f"{root}/commitlog"
    return {
        name: hashlib.sha256(fs.read_bytes(f"{directory}/{name}")).hexdigest()
        for name in fs.listdir(directory)
    }


def test_reopen_gives_the_same_log_and_hard_state() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    entries = LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(40))
    storage.append(entries)
    storage.set_hard_state(HardState(1, "a", 30))
    storage.sync()
    storage.close()
    reopened = open_storage(fs)
    assert all_entries(reopened) == entries
    assert reopened.initial_state() == (HardState(1, "a", 30), BOOTSTRAP)
    assert reopened.log_end_physical_offset == reopened.commit_log.max_offset
    assert len(fs.listdir("/node/commitlog")) > 3  # the log rolled segments


def test_records_read_back_through_the_store_name_their_place() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    storage.append(LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(30)))
    log = storage.commit_log
    scanned = list(log.scan(0, log.max_offset))
    assert scanned
    for physical_offset, _ in scanned:
        assert log.read_record(physical_offset).physical_offset == physical_offset


def test_torn_tail_after_power_loss_is_cut_and_the_log_stays_appendable() -> None:
    for seed in range(12):
        fs = SimFileSystem()
        leader = LeaderLog(SEGMENT_SIZE_BYTES)
        entries = leader.entries(1, 1, specs(30, seed))
        storage = open_storage(fs)
        storage.append(entries[:12])
        storage.set_hard_state(HardState(1, "a", 12))
        storage.sync()
        storage.append(entries[12:])  # never synced
        fs.power_loss(random.Random(seed))
        reopened = open_storage(fs)
        last = reopened.last_index()
        assert 12 <= last <= 30
        assert all_entries(reopened) == entries[:last]
        assert reopened.initial_state()[0] == HardState(1, "a", 12)
        more = leader.entries(last + 1, 2, specs(5, seed + 100))
        reopened.append(more)
        reopened.close()
        assert all_entries(open_storage(fs)) == entries[:last] + more


def test_index_behind_the_commit_log_is_rebuilt() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    entries = LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(40))
    storage.append(entries)
    storage.close()
    index_dir = f"/node/{RAFT_INDEX_DIR}"
    names = fs.listdir(index_dir)
    for name in names[2:]:
        fs.remove(f"{index_dir}/{name}")
    handle = fs.open(f"{index_dir}/{names[1]}")
    handle.truncate(50)  # mid-unit
    handle.close()
    assert all_entries(open_storage(fs)) == entries


def test_index_ahead_of_the_commit_log_is_cut() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    entries = LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(40))
    storage.append(entries)
    storage.sync()
    # The CommitLog loses entries 25.. (as a crash could) while the index keeps their units.
    storage.commit_log.truncate_after(storage.placement(25).physical_offset)
    storage.close()
    assert all_entries(open_storage(fs)) == entries[:24]


def test_conflicting_tail_is_replaced_and_rewritten_in_place() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    storage.append(leader.entries(1, 1, specs(20)))
    storage.set_hard_state(HardState(2, "b", 8))
    replacement = leader.entries(9, 2, specs(6, seed=5))
    storage.append(replacement)
    assert storage.last_index() == 14
    assert all_entries(storage)[8:] == replacement
    storage.close()
    assert all_entries(open_storage(fs))[8:] == replacement


def test_forgotten_recent_entries_are_read_back_and_appending_goes_on() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    first = leader.entries(1, 1, specs(20))
    storage.append(first)
    storage.forget_recent()  # what an idle node does (node/heap.py)
    assert all_entries(storage) == first
    rest = leader.entries(21, 1, specs(10, seed=3))
    storage.append(rest)
    storage.forget_recent()
    storage.forget_recent()
    replacement = leader.entries(25, 2, specs(4, seed=4))
    storage.append(replacement)  # a conflicting tail after a forget
    assert all_entries(storage) == first + rest[:4] + replacement
    assert storage.entries(22, 26, 1 << 30) == rest[1:4] + replacement[:1]


def test_truncating_at_or_below_the_commit_index_is_refused() -> None:
    storage = open_storage(SimFileSystem())
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    storage.append(leader.entries(1, 1, specs(10)))
    storage.set_hard_state(HardState(1, None, 6))
    with pytest.raises(AssertionError, match="commit index"):
        storage.append(leader.entries(6, 2, specs(2)))


def test_replicas_fed_the_same_entries_are_byte_identical_across_rolls() -> None:
    fs = SimFileSystem()
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    final = leader.entries(1, 1, specs(60, seed=1))
    # Replica A gets everything in one append.
    a = open_storage(fs, "/a")
    a.append(final)
    # Replica B gets it in odd batches, after a diverging tail from a deposed leader that
    # rolled into another segment, which is truncated and rewritten.
    b = open_storage(fs, "/b")
    b.append(final[:20])
    stale = LeaderLog(SEGMENT_SIZE_BYTES)
    stale.entries(1, 1, specs(60, seed=1)[:20])
    b.append(stale.entries(21, 1, [[bytes(200)]] * 12))
    for start in range(20, 60, 7):
        b.append(final[start : start + 7])
    # Replica C restarts in the middle.
    c = open_storage(fs, "/c")
    c.append(final[:33])
    c.close()
    c = open_storage(fs, "/c")
    c.append(final[33:])
    for storage in (a, b, c):
        storage.close()
    digests = segment_digests(fs, "/a")
    assert len(digests) > 5
    assert segment_digests(fs, "/b") == digests
    assert segment_digests(fs, "/c") == digests


def test_planning_counts_reservations_not_yet_persisted() -> None:
    storage = open_storage(SimFileSystem())
    proposed = [planned_entry(storage, index, 1, [bytes(300)]) for index in range(1, 8)]
    conf_at = storage.plan_entry(len(CONF), EntryType.CONF_CHANGE)
    proposed.append(Entry(8, 1, EntryType.CONF_CHANGE, CONF))
    proposed.append(planned_entry(storage, 9, 1, [b"x"]))
    storage.append(proposed[:3])
    storage.append(proposed[3:])
    assert all_entries(storage) == proposed
    assert storage.placement(8).physical_offset == conf_at
    # A wrong plan is refused before any byte is written.
    end = storage.commit_log.max_offset
    with pytest.raises(ValueError, match="planned for another position"):
        storage.append([Entry(10, 1, data=payload_at(end + 8, [b"y"]))])
    assert storage.commit_log.max_offset == end and storage.last_index() == 9
    storage.plan_entry(100)
    storage.cancel_plans()
    assert storage.next_physical_offset_for(0) == end


def test_commit_index_past_the_recovered_log_is_an_error() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    storage.append(LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(10)))
    storage.set_hard_state(HardState(1, None, 10))
    storage.sync()
    storage.commit_log.truncate_after(storage.placement(6).physical_offset)
    storage.close()
    with pytest.raises(CorruptStateFileError, match="durable entries were lost"):
        open_storage(fs)


def test_snapshot_beyond_the_log_needs_its_segments_first() -> None:
    storage = open_storage(SimFileSystem())
    storage.append(LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(5)))
    with pytest.raises(ValueError, match="install its segments first"):
        storage.apply_snapshot(SnapshotMeta(50, 3, BOOTSTRAP))
    storage.apply_snapshot(SnapshotMeta(50, 3, BOOTSTRAP), storage.commit_log.max_offset)
    assert (storage.first_index(), storage.last_index(), storage.term(50)) == (51, 50, 3)


def test_entries_whose_segments_retention_deleted_are_compacted() -> None:
    storage = open_storage(SimFileSystem())
    storage.append(LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(40)))
    log = storage.commit_log
    log.flush()
    log.delete_segment(log.min_offset)
    with pytest.raises(LogCompactedError):
        storage.entries(1, 3, 1 << 20)
    assert storage.entries(40, 41, 0)[0].index == 40


def test_vote_is_durable_at_sync_and_a_bare_commit_index_at_close() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    storage.append(LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(10)))
    storage.set_hard_state(HardState(2, "b", 0))
    storage.sync()
    storage.set_hard_state(HardState(2, "b", 9))  # the commit index alone moved
    storage.sync()
    fs.power_loss(random.Random(3))
    reopened = open_storage(fs)
    # The vote survived; the commit index is relearned (the core restarts from applied).
    assert reopened.initial_state()[0] == HardState(2, "b", 0)
    assert reopened.last_index() == 10
    reopened.set_hard_state(HardState(2, "b", 9))
    reopened.close()
    assert open_storage(fs).initial_state()[0] == HardState(2, "b", 9)


def test_compaction_then_retention_survives_a_restart() -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    entries = LeaderLog(SEGMENT_SIZE_BYTES).entries(1, 1, specs(40))
    storage.append(entries)
    log = storage.commit_log
    first_segment_end = log.min_offset + SEGMENT_SIZE_BYTES
    ends = {index: storage.placement(index).end_physical_offset for index in range(1, 41)}
    last_deleted = max(index for index, end in ends.items() if end <= first_segment_end)
    conf_state = ConfState(voters=("a", "b", "c"), learners=("d",))
    storage.compact(last_deleted, conf_state)
    log.flush()
    log.delete_segment(log.min_offset)
    storage.close()
    reopened = open_storage(fs)
    assert reopened.first_index() == last_deleted + 1
    assert reopened.initial_state()[1] == conf_state
    assert all_entries(reopened) == entries[last_deleted:]
