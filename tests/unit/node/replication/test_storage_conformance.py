"""RaftLogStorage answers exactly as MemoryStorage (the reference LogStorage) after the same
sequence of appends, conflicting appends, compactions, snapshots, hard states and restarts."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftlog.node.replication import raft_index
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.raft.memory_storage import MemoryStorage
from raftlog.raft.types import ConfChange, ConfChangeType, ConfState, HardState, SnapshotMeta
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.node.replication.entry_factory import LeaderLog

SEGMENT_SIZE_BYTES = 1024
BOOTSTRAP = ConfState(voters=("a", "b", "c"))


def open_storage(fs: SimFileSystem) -> RaftLogStorage:
    return RaftLogStorage.open(
        fs,
        "/node",
        segment_size_bytes=SEGMENT_SIZE_BYTES,
        bootstrap=BOOTSTRAP,
        index_units_per_file=8,
    )


def outcome(call: Callable[..., Any], *args: int) -> Any:
    try:
        return call(*args)
    except Exception as error:  # the same exception type is part of the contract
        return type(error)


def assert_same(storage: RaftLogStorage, memory: MemoryStorage, data: st.DataObject) -> None:
    first, last = memory.first_index(), memory.last_index()
    assert (storage.first_index(), storage.last_index()) == (first, last)
    assert storage.snapshot() == memory.snapshot()
    assert storage.initial_state() == memory.initial_state()
    for index in range(max(0, first - 2), last + 3):
        assert outcome(storage.term, index) == outcome(memory.term, index), index
    for _ in range(3):
        low = data.draw(st.integers(max(0, first - 2), last + 2), label="low")
        high = data.draw(st.integers(low, last + 3), label="high")
        max_bytes = data.draw(st.sampled_from([0, 100, 600, 1 << 20]), label="max_bytes")
        found = outcome(storage.entries, low, high, max_bytes)
        assert found == outcome(memory.entries, low, high, max_bytes), (low, high, max_bytes)


_bodies = st.lists(st.binary(max_size=150), max_size=2)
_conf = st.sampled_from(["d", "e"]).map(
    lambda node: ConfChange(ConfChangeType.ADD_LEARNER, node).encode()
)
_spec = st.one_of(_bodies, _bodies, _bodies, _conf)


@settings(
    max_examples=int(os.environ.get("NODE_CONFORMANCE_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def _same_answers_as_memory_storage(data: st.DataObject) -> None:
    fs = SimFileSystem()
    storage = open_storage(fs)
    memory = MemoryStorage(BOOTSTRAP)
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    term = 1
    for _ in range(data.draw(st.integers(4, 14), label="steps")):
        first, last = memory.first_index(), memory.last_index()
        step = data.draw(
            st.sampled_from(["append", "append", "append", "compact", "snapshot", "reopen", "hs"])
        )
        if step == "append":
            start = data.draw(st.integers(first, last + 1), label="start")
            term += data.draw(st.integers(0, 1), label="term step")
            specs = data.draw(st.lists(_spec, min_size=1, max_size=5), label="specs")
            entries = leader.entries(start, term, specs)
            storage.append(entries)
            memory.append(entries)
        elif step == "compact" and last >= first:
            index = data.draw(st.integers(first - 1, last), label="compact")
            conf_state = ConfState(voters=("a", "b"), learners=("d",))
            storage.compact(index, conf_state)
            memory.compact(index, conf_state)
        elif step == "snapshot" and last >= first:
            index = data.draw(st.integers(first, last), label="snapshot")
            meta = SnapshotMeta(index, memory.term(index), ConfState(voters=("a", "c")))
            storage.apply_snapshot(meta)
            memory.apply_snapshot(meta)
        elif step == "reopen":
            storage.close()
            storage = open_storage(fs)
        elif step == "hs":
            hard_state = HardState(term, data.draw(st.sampled_from([None, "a", "b"])), 0)
            storage.set_hard_state(hard_state)
            memory.set_hard_state(hard_state)
        assert_same(storage, memory, data)
    storage.close()


def test_same_answers_as_memory_storage() -> None:
    # A tiny in-memory tail of the index, so its file reads answer too.
    with mock.patch.object(raft_index, "_TAIL_UNITS", 3):
        _same_answers_as_memory_storage()
