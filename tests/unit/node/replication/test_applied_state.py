"""The applied-state checkpoint (node/replication/applied_state.py): what it keeps comes back
whole, and a checkpoint the log no longer matches, or a damaged one, is ignored (the node
then replays from the snapshot point), never trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.node.control import ScheduleProgress
from raftlog.node.messaging.schedule_table import ScheduleTable
from raftlog.node.replication import applied_state
from raftlog.node.replication.applied_state import AppliedState
from raftlog.node.replication.producer_table import ProducerTable
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.raft.types import ConfState, LogCompactedError
from raftlog.store.filesystem import OsFileSystem
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.node.replication.entry_factory import LeaderLog


class _Log:
    """A log holding entries first..last, each of term ``term``."""

    def __init__(self, first: int, last: int, term: int = 2) -> None:
        self._first, self._last, self._term = first, last, term

    def first_index(self) -> int:
        return self._first

    def last_index(self) -> int:
        return self._last

    def term(self, index: int) -> int:
        if index < self._first - 1:
            raise LogCompactedError(index)
        return self._term  # the snapshot point's term too


def _tables() -> tuple[ProducerTable, ScheduleTable]:
    producers = ProducerTable(retention_ms=60_000)
    for sequence in range(1, 12):
        producers.apply("p1", sequence, (100 + sequence, 2), 1_000 + sequence)
    producers.apply("p2", 1, (200, 2), 2_000)
    schedule = ScheduleTable()
    schedule.apply(ScheduleProgress(((0, 5, ()), (18, 3, (7, 9)))))
    return producers, schedule


def _state(index: int = 50, term: int = 2) -> AppliedState:
    producers, schedule = _tables()
    return AppliedState(
        index,
        term,
        ConfState(voters=("n1", "n2", "n3"), learners=("n4",)),
        producers.export(),
        schedule.export(),
    )


def test_saved_state_loads_back_whole(tmp_path: Path) -> None:
    path = str(tmp_path / "raftstate" / "applied_state")
    state = _state()
    applied_state.save(OsFileSystem(), path, state)
    loaded = applied_state.load(OsFileSystem(), path)
    assert loaded == state
    producers, schedule = ProducerTable(retention_ms=60_000), ScheduleTable()
    assert loaded is not None
    producers.restore(loaded.producers)
    schedule.restore(loaded.schedule)
    original_producers, original_schedule = _tables()
    # The same verdicts as the table it came from: duplicates remembered, the next one stored.
    for sequence in (3, 4, 11, 12, 13):
        assert producers.check("p1", sequence) == original_producers.check("p1", sequence)
    assert producers.check("p2", 1).entry == (200, 2)
    assert len(producers) == 2
    for queue_id in (0, 18, 1):
        assert schedule.progress(queue_id) == original_schedule.progress(queue_id)


def test_a_missing_or_damaged_checkpoint_loads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "applied_state"
    assert applied_state.load(OsFileSystem(), str(path)) is None
    applied_state.save(OsFileSystem(), str(path), _state())
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    assert applied_state.load(OsFileSystem(), str(path)) is None


@pytest.mark.parametrize(
    ("log", "usable"),
    [
        (_Log(1, 80), True),
        (_Log(50, 80), True),  # the checkpoint's entry is the first one held
        (_Log(51, 80), True),  # ... or the snapshot point (compacted to it)
        (_Log(52, 80), False),  # a snapshot point past it: installed or compacted
        (_Log(1, 49), False),  # the log ends before it (entries lost)
        (_Log(1, 80, term=3), False),  # another entry at that index
    ],
)
def test_the_checkpoint_is_used_only_while_the_log_holds_its_entry(log: _Log, usable: bool) -> None:
    state = _state(index=50, term=2)
    assert (applied_state.usable(state, log) is state) is usable


def test_a_checkpoint_with_a_malformed_table_is_not_used() -> None:
    state = _state()
    broken = AppliedState(state.index, state.term, state.conf_state, {"producers": 3}, {})
    assert applied_state.usable(broken, _Log(1, 80)) is None
    with pytest.raises(ValueError):
        ProducerTable(0).restore({"producers": [["p", "x", 1, []]], "expired_at_ms": 0})
    with pytest.raises(ValueError):
        ScheduleTable().restore([])


def test_a_checkpoint_at_the_snapshot_point_of_a_compacted_log_is_used() -> None:
    # Retention compacts the Raft log up to an applied entry: a checkpoint taken there is the
    # snapshot point itself and still holds the tables only replay could rebuild.
    fs = SimFileSystem()
    storage = RaftLogStorage.open(
        fs, "/node", segment_size_bytes=1024, bootstrap=ConfState(voters=("a",))
    )
    storage.append(LeaderLog(1024).entries(1, 2, [[b"x" * 50] for _ in range(12)]))
    storage.sync()
    storage.compact(8, ConfState(voters=("a",)))
    assert storage.first_index() == 9
    assert applied_state.usable(_state(index=8, term=2), storage) is not None
    assert applied_state.usable(_state(index=7, term=2), storage) is None
    assert applied_state.usable(_state(index=8, term=1), storage) is None
    assert applied_state.usable(_state(index=12, term=2), storage) is not None
    assert applied_state.usable(_state(index=13, term=2), storage) is None
