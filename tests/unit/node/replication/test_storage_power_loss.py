"""Power loss at any point of a Raft writer's life (appends, conflicting appends that cut a
tail, syncs, hard state changes): the reopened log is a prefix of what was written, holds at
least everything synced, keeps the durable vote, and takes new entries."""

from __future__ import annotations

import os
import random
from unittest import mock

import pytest

from raftlog.node.replication import raft_index
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.raft.types import ConfChange, ConfChangeType, ConfState, Entry, HardState
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.node.replication.entry_factory import LeaderLog

SEGMENT_SIZE_BYTES = 768
SEEDS = int(os.environ.get("NODE_POWER_LOSS_SEEDS", "25"))
CONF = ConfChange(ConfChangeType.ADD_LEARNER, "d").encode()


def open_storage(fs: SimFileSystem) -> RaftLogStorage:
    return RaftLogStorage.open(
        fs,
        "/node",
        segment_size_bytes=SEGMENT_SIZE_BYTES,
        bootstrap=ConfState(voters=("a", "b", "c")),
        index_units_per_file=4,
    )


def random_specs(rng: random.Random, count: int) -> list[list[bytes] | bytes]:
    return [
        CONF
        if rng.random() < 0.1
        else [rng.randbytes(rng.randint(0, 90)) for _ in range(rng.randint(0, 3))]
        for _ in range(count)
    ]


@pytest.mark.parametrize("seed", range(SEEDS))
def test_power_loss_keeps_a_synced_prefix(seed: int) -> None:
    # A tiny in-memory tail of the index, so its file reads answer too.
    with mock.patch.object(raft_index, "_TAIL_UNITS", 3):
        _power_loss_keeps_a_synced_prefix(seed)


def _power_loss_keeps_a_synced_prefix(seed: int) -> None:
    rng = random.Random(seed)
    fs = SimFileSystem()
    leader = LeaderLog(SEGMENT_SIZE_BYTES)
    model: list[Entry] = []
    durable_floor = 0  # entries 1..floor are synced and never cut since
    durable_vote: HardState = HardState()
    term = 1
    for _ in range(2):  # crash, recover, go on, crash again
        storage = open_storage(fs)
        assert storage.initial_state()[0] == durable_vote
        last = storage.last_index()
        assert durable_floor <= last <= len(model)
        for index in range(1, last + 1):
            assert storage.entries(index, index + 1, 0) == [model[index - 1]]
        model = model[:last]
        for _ in range(rng.randint(3, 12)):
            action = rng.random()
            if action < 0.2 and len(model) > durable_floor:
                # A new leader's entries replace an uncommitted tail.
                term += 1
                start = rng.randint(max(durable_floor, len(model) - 6) + 1, len(model))
                entries = leader.entries(start, term, random_specs(rng, rng.randint(1, 4)))
                storage.append(entries)
                model = model[: start - 1] + entries
            elif action < 0.7:
                entries = leader.entries(len(model) + 1, term, random_specs(rng, rng.randint(1, 6)))
                storage.append(entries)
                model += entries
            else:
                hard_state = HardState(term, rng.choice(["a", "b"]))
                storage.set_hard_state(hard_state)
                storage.sync()
                durable_floor, durable_vote = len(model), hard_state
        fs.power_loss(rng)
    final = open_storage(fs)
    last = final.last_index()
    assert durable_floor <= last
    more = leader.entries(last + 1, term + 1, random_specs(rng, 3))
    final.append(more)
    final.close()
    reopened = open_storage(fs)
    assert reopened.entries(1, reopened.last_index() + 1, 1 << 30) == model[:last] + more
