"""A Raft member whose disk fills up (ENOSPC part way through appending a Ready's entries) in
the simulated cluster, with the node's own Ready handler, proposal path and storage:

- the member does not crash and nobody's term moves while its disk is full;
- nothing it could not write is acknowledged: a full leader applies (answers) none of the
  entries it failed to write, a full follower acknowledges none of them to the leader;
- its Raft log keeps only whole entries, the same as before the refused write, also after
  a power loss;
- a full leader refuses new writes with DiskFullError (RESOURCE_EXHAUSTED to clients);
- once space is back it writes the entries, catches up, takes writes again, and the cluster
  converges with every checker of the simulation run after every step.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator
from dataclasses import replace

import pytest

from raftlog.raft.types import Entry, NodeId, ProposalDroppedError, Role
from raftlog.store.errors import DiskFullError

from .cluster import Cluster
from .history import History
from .options import draw_options
from .simulation import heal
from .workload import body_of

SETTLE_TICKS_MAX = 200
FULL_TICKS = 60
"""Ticks spent with a full disk: many election timeouts (10 ticks each)."""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    options = replace(
        draw_options(random.Random(0), "default"),
        node_count=3,
        election_ticks=10,
        heartbeat_ticks=2,
        pre_vote=True,
        check_quorum=True,
        max_inflight_appends=8,
        heal_ticks_max=600,
    )
    with tempfile.TemporaryDirectory(prefix="raftlog-sim-") as root_dir:
        running = Cluster(options, random.Random(0), History(), root_dir)
        try:
            yield running
        finally:
            running.close()


def write_ready_leader(cluster: Cluster) -> NodeId:
    """Tick until a leader takes writes (proposes one value to find out)."""
    data = cluster.workload.new_data(0)
    for _ in range(SETTLE_TICKS_MAX):
        cluster.tick()
        leader = cluster.leader()
        if leader is not None and cluster.propose(leader, data):
            return leader
    raise AssertionError(f"no write-ready leader:\n{cluster.describe_nodes()}")


def settle(cluster: Cluster) -> None:
    """Tick until every proposal was applied everywhere."""
    for _ in range(SETTLE_TICKS_MAX):
        cluster.tick()
        applied = [cluster.drivers[n].applied_index for n in cluster.node_ids]
        last = [cluster.drivers[n].disk.current.last_index for n in cluster.node_ids]
        if not cluster.workload.pending() and len(set(applied + last)) == 1:
            return
    raise AssertionError(f"did not settle:\n{cluster.describe_nodes()}")


def terms(cluster: Cluster) -> dict[NodeId, int]:
    return {n: d.node.term for n, d in cluster.drivers.items() if d.node is not None}


def fill_disk(cluster: Cluster, node_id: NodeId, room_bytes: int = 40) -> None:
    """Leave ``room_bytes`` of space on ``node_id``'s disk: less than one entry needs."""
    fs = cluster.drivers[node_id].fs
    fs.capacity_bytes = fs.used_bytes() + room_bytes


def log_entries(cluster: Cluster, node_id: NodeId) -> list[Entry]:
    raft_log = cluster.drivers[node_id].raft_log
    assert raft_log is not None
    return raft_log.entries(raft_log.first_index(), raft_log.last_index() + 1, 1 << 30)


def applied_bodies(cluster: Cluster, node_id: NodeId) -> list[bytes | None]:
    return [body_of(entry) for entry in cluster.drivers[node_id].state_machine]


def test_a_leader_whose_disk_is_full_keeps_its_term_and_acknowledges_nothing_unwritten(
    cluster: Cluster,
) -> None:
    leader = write_ready_leader(cluster)
    settle(cluster)
    before_terms, before_log = terms(cluster), log_entries(cluster, leader)
    fill_disk(cluster, leader)
    refused = cluster.workload.new_data(0)
    assert cluster.propose(leader, refused)  # proposed: the append fails in its Ready
    handler = cluster.drivers[leader].handler
    assert handler is not None and isinstance(handler.disk_full, DiskFullError)
    for _ in range(FULL_TICKS):
        cluster.tick()
    assert cluster.leader() == leader and terms(cluster) == before_terms
    assert log_entries(cluster, leader) == before_log
    assert refused not in applied_bodies(cluster, leader)  # never answered to its client
    # A leader that cannot write refuses new writes at once.
    with pytest.raises(ProposalDroppedError, match="no space left"):
        cluster.drivers[leader].propose(b"refused at once", cluster.now_ms())
    cluster.drivers[leader].fs.capacity_bytes = None
    settle_after_heal(cluster)
    assert refused in applied_bodies(cluster, leader)
    assert terms(cluster) == before_terms


def settle_after_heal(cluster: Cluster) -> None:
    heal(cluster)
    for node_id in cluster.node_ids:
        node = cluster.drivers[node_id].node
        assert node is not None and node.role in (Role.LEADER, Role.FOLLOWER)


def test_a_follower_whose_disk_is_full_acknowledges_nothing_and_catches_up(
    cluster: Cluster,
) -> None:
    leader = write_ready_leader(cluster)
    settle(cluster)
    follower = next(n for n in cluster.node_ids if n != leader)
    before_terms, before_log = terms(cluster), log_entries(cluster, follower)
    fill_disk(cluster, follower)
    for _ in range(5):
        assert cluster.propose(leader, cluster.workload.new_data(0))
    for _ in range(FULL_TICKS):
        cluster.tick()
    leader_node = cluster.drivers[leader].node
    assert leader_node is not None
    assert leader_node.status().progress[follower].match_index == before_log[-1].index
    assert log_entries(cluster, follower) == before_log
    assert cluster.leader() == leader and terms(cluster) == before_terms
    # The two others committed without it.
    assert leader_node.commit_index > before_log[-1].index
    cluster.drivers[follower].fs.capacity_bytes = None
    settle_after_heal(cluster)
    assert terms(cluster) == before_terms


@pytest.mark.parametrize("seed", range(4))
def test_a_power_loss_while_the_disk_is_full_recovers_whole_entries(
    cluster: Cluster, seed: int
) -> None:
    leader = write_ready_leader(cluster)
    settle(cluster)
    follower = next(n for n in cluster.node_ids if n != leader)
    before_log = log_entries(cluster, follower)
    rng = random.Random(seed)
    fill_disk(cluster, follower, room_bytes=rng.randint(0, 400))
    for _ in range(4):
        cluster.propose(leader, cluster.workload.new_data(0))
        cluster.tick()
    written = log_entries(cluster, follower)
    assert written[: len(before_log)] == before_log
    cluster.crash(follower, torn=True)
    cluster.drivers[follower].fs.capacity_bytes = None
    cluster.restart(follower)
    recovered = log_entries(cluster, follower)
    assert recovered[: len(before_log)] == before_log  # synced before: kept
    assert recovered == written[: len(recovered)]  # only whole entries it had written
    heal(cluster)
