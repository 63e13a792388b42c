"""A small randomized cluster run (drops, duplicates, reordering, partitions, restarts,
leadership transfers, membership changes, compaction), checking Raft's safety properties after
every step. The full deterministic simulation lives in tests/sim; this one keeps the core
honest while it is edited. Seeds are fixed, so a failure replays exactly."""

from __future__ import annotations

import contextlib
import random

import pytest

from raftlog.raft.types import (
    ConfChange,
    ConfChangeType,
    MessageType,
    ProposalDroppedError,
)
from tests.unit.raft.cluster import Cluster, SafetyChecker

POOL = ("a", "b", "c", "d", "e")


def _deliver_randomly(cluster: Cluster, rng: random.Random, checker: SafetyChecker) -> None:
    """Deliver what is in flight in random order (some dropped, some twice), checking after
    each round; whatever is left after 50 rounds is lost."""
    for _ in range(50):
        cluster.flush()
        if not cluster.queue:
            return
        batch, cluster.queue = cluster.queue, []
        rng.shuffle(batch)
        for message in batch:
            if not cluster.deliverable(message) or rng.random() < 0.1:
                if message.type == MessageType.SNAPSHOT:
                    cluster.nodes[message.source].report_snapshot(message.target, False)
                continue
            copies = 2 if rng.random() < 0.05 else 1
            for _ in range(copies):
                cluster.nodes[message.target].step(message)
            if message.type == MessageType.SNAPSHOT:
                cluster.nodes[message.source].report_snapshot(message.target, True)
        checker.check(cluster)
    for message in cluster.queue:  # whatever is left is lost
        if message.type == MessageType.SNAPSHOT:
            cluster.nodes[message.source].report_snapshot(message.target, False)
    cluster.queue.clear()


def run(
    seed: int, steps: int, pre_vote: bool, check_quorum: bool, **config_fields: object
) -> Cluster:
    rng = random.Random(seed)
    fields: dict[str, object] = {
        "pre_vote": pre_vote,
        "check_quorum": check_quorum,
        "election_ticks": 6,
        "max_inflight_appends": 4,
        "max_append_bytes": 16,
        **config_fields,
    }
    cluster = Cluster(("a", "b", "c"), seed=seed, **fields)
    for node_id in ("d", "e"):
        cluster.add_node(node_id, cluster.nodes["a"].conf_state)
    checker = SafetyChecker()
    proposals = 0

    for _ in range(steps):
        action = rng.random()
        leaders = cluster.leader_ids()
        if action < 0.5:
            for node_id in sorted(cluster.nodes):
                cluster.nodes[node_id].tick()
        elif action < 0.75 and leaders:
            proposals += 1
            with contextlib.suppress(ProposalDroppedError):
                cluster.nodes[rng.choice(leaders)].propose(b"p%d" % proposals)
        elif action < 0.8:
            cluster.heal()
            if rng.random() < 0.7:
                members = sorted(cluster.nodes)
                rng.shuffle(members)
                cut = rng.randrange(1, len(members))
                cluster.partition(members[:cut], members[cut:])
        elif action < 0.84:
            cluster.restart(rng.choice(sorted(cluster.nodes)))
        elif action < 0.87 and leaders:
            cluster.nodes[rng.choice(leaders)].transfer_leadership()
        elif action < 0.91 and leaders:
            leader = cluster.nodes[rng.choice(leaders)]
            voters = leader.conf_state.voters
            node_id = rng.choice(POOL)
            if node_id in voters and len(voters) > 3:
                change = ConfChange(ConfChangeType.REMOVE_NODE, node_id)
            elif node_id in leader.conf_state.learners:
                change = ConfChange(ConfChangeType.ADD_VOTER, node_id)
            else:
                change = ConfChange(ConfChangeType.ADD_LEARNER, node_id)
            with contextlib.suppress(ProposalDroppedError):
                leader.propose_conf_change(change)
        elif action < 0.93:
            node_id = rng.choice(sorted(cluster.nodes))
            if cluster.nodes[node_id].status().applied_index > 0:
                cluster.compact(node_id)
        elif leaders:
            cluster.nodes[rng.choice(leaders)].read_index(b"r%d" % rng.randrange(10**9))
        _deliver_randomly(cluster, rng, checker)
        checker.check(cluster)

    cluster.heal()
    checker.check(cluster)
    return cluster


def commit_after_healing(cluster: Cluster, ticks_max: int) -> bool:
    """Liveness: with every fault gone, a proposal commits on every voter in time (proposed
    again to each new leader, since a deposed leader's proposal may be lost)."""
    proposed_term, index = 0, 0
    for _ in range(ticks_max):
        for node_id in sorted(cluster.nodes):
            cluster.nodes[node_id].tick()
        cluster.pump()
        leaders = cluster.leader_ids()
        if not leaders:
            continue
        leader = cluster.nodes[leaders[0]]
        if leader.term != proposed_term:
            with contextlib.suppress(ProposalDroppedError):
                index = leader.propose(b"final")
                proposed_term = leader.term
            continue
        voters = leader.conf_state.voters
        if all(cluster.nodes[n].commit_index >= index for n in voters):
            return True
    return False


@pytest.mark.parametrize("seed", range(12))
def test_random_cluster_keeps_safety_and_recovers(seed: int):
    cluster = run(seed, steps=400, pre_vote=seed % 2 == 0, check_quorum=seed % 3 != 0)
    # Without pre-vote and check-quorum a stale node can keep disrupting for a while.
    assert commit_after_healing(cluster, ticks_max=400), seed
