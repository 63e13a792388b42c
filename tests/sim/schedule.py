"""The fault schedule of a seeded run: what goes wrong on each tick of the safety phase.

Rules this module keeps: one ``random.Random`` (a child of the run's seed) makes every choice,
and candidates are always drawn from sorted lists; the schedule only calls Cluster steps, so
anything it does can also be done by hand (the Hypothesis machine) or replayed by seed.
"""

from __future__ import annotations

import random

from raftlog.raft.types import ConfChange, ConfChangeType

from .cluster import Cluster
from .options import SimOptions

CLIENT_TO_LEADER_SHARE = 0.8
"""How often a client sends its proposal to the current leader rather than any live node."""


class FaultSchedule:
    def __init__(self, options: SimOptions, rng: random.Random) -> None:
        self._options = options
        self._rng = rng
        self._partitioned = False

    def start(self, cluster: Cluster) -> None:
        options = self._options
        faults = cluster.network.faults
        faults.drop_probability = options.drop_probability
        faults.duplicate_probability = options.duplicate_probability
        faults.delay_probability = options.delay_probability
        faults.delay_ticks_max = options.delay_ticks_max
        cluster.crash_after_vote_probability = options.crash_after_vote_probability
        cluster.leader_crash_before_send_probability = options.leader_crash_before_send_probability

    def before_tick(self, cluster: Cluster) -> None:
        options = self._options
        rng = self._rng
        self._partitions(cluster)
        if rng.random() < options.crash_probability:
            self._crash_one(cluster)
        for node_id in cluster.down_nodes():
            if rng.random() < options.restart_probability:
                cluster.restart(node_id)
        for node_id in cluster.up_nodes():
            if rng.random() < options.background_sync_probability:
                cluster.background_sync(node_id)
        if rng.random() < options.proposal_probability:
            self._propose(cluster)
        if rng.random() < options.transfer_probability:
            leader = cluster.leader()
            if leader is not None:
                target = rng.choice([node for node in cluster.node_ids if node != leader])
                cluster.transfer_leadership(leader, target)
        if rng.random() < options.membership_change_probability:
            self._change_membership(cluster)
        if rng.random() < options.compaction_probability:
            up = cluster.up_nodes()
            if up:
                cluster.compact(rng.choice(up))

    def _partitions(self, cluster: Cluster) -> None:
        options = self._options
        rng = self._rng
        if self._partitioned:
            if rng.random() < options.partition_heal_probability:
                cluster.heal()
                self._partitioned = False
            return
        if rng.random() >= options.partition_probability:
            return
        nodes = list(cluster.node_ids)
        leader = cluster.leader()
        if leader is not None and rng.random() < 0.5:
            # Cut the leader off from the rest: the classic way to strand an uncommitted tail.
            side_a = [leader]
        else:
            rng.shuffle(nodes)
            side_a = sorted(nodes[: rng.randint(1, len(nodes) - 1)])
        side_b = [node for node in cluster.node_ids if node not in side_a]
        one_way = rng.random() < options.one_way_partition_share
        cluster.partition(side_a, side_b, one_way)
        self._partitioned = True

    def _crash_one(self, cluster: Cluster) -> None:
        up = cluster.up_nodes()
        if not up:
            return
        leader = cluster.leader()
        if leader is not None and self._rng.random() < self._options.crash_leader_share:
            victim = leader
        else:
            victim = self._rng.choice(up)
        torn = self._rng.random() < self._options.torn_write_probability
        cluster.crash(victim, torn)

    def _change_membership(self, cluster: Cluster) -> None:
        """One voter at a time: remove a follower, or add back whoever is not a voter."""
        leader = cluster.leader()
        if leader is None:
            return
        node = cluster.drivers[leader].node
        assert node is not None
        missing = [node_id for node_id in cluster.node_ids if node_id not in node.conf_state.voters]
        if missing:
            change = ConfChange(ConfChangeType.ADD_VOTER, missing[0])
        else:
            followers = [node_id for node_id in cluster.node_ids if node_id != leader]
            change = ConfChange(ConfChangeType.REMOVE_NODE, self._rng.choice(followers))
        cluster.propose_conf_change(leader, change)

    def _propose(self, cluster: Cluster) -> None:
        up = cluster.up_nodes()
        if not up:
            return
        leader = cluster.leader()
        if leader is not None and self._rng.random() < CLIENT_TO_LEADER_SHARE:
            target = leader
        else:
            target = self._rng.choice(up)
        cluster.propose(target, cluster.workload.new_data(cluster.clock.now_tick))
