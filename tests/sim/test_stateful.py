"""Hypothesis chooses the schedule: which message is delivered, dropped or duplicated, who
ticks, crashes, restarts, is cut off, or proposes. The same checkers run after every step, and
the run ends with the heal phase (faults off, everyone up, converge), so a failure shrinks to
a short schedule.

Profiles: "sim-default" keeps ``make test`` quick; the slow-marked test runs "sim-slow"
(``make test-slow``). The cluster's own randomness (election timers, torn writes) is seeded
with 0, so a schedule Hypothesis prints replays exactly.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from raftlog.raft.types import ConfChange, ConfChangeType, PlantedBug

from .checkers import SafetyViolation
from .cluster import Cluster
from .history import History
from .options import draw_options
from .simulation import heal

NODE_IDS = ("n1", "n2", "n3")

settings.register_profile(
    "sim-default",
    max_examples=100,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "sim-slow",
    max_examples=400,
    stateful_step_count=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class ClusterMachine(RuleBasedStateMachine):
    planted_bugs: frozenset[PlantedBug] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        options = replace(
            draw_options(random.Random(0), "default"),
            node_count=len(NODE_IDS),
            # Short timers so elections happen within a few dozen steps.
            election_ticks=3,
            heartbeat_ticks=1,
            pre_vote=True,
            check_quorum=True,
            max_append_bytes=1,
            max_inflight_appends=4,
            heal_ticks_max=300,
            planted_bugs=self.planted_bugs,
        )
        # Only the stores' lock files are real; removed in teardown.
        self._root_dir = tempfile.mkdtemp(prefix="raftlog-sim-")
        self.cluster = Cluster(options, random.Random(0), History(), self._root_dir)

    def _pick_pending(self, data: st.DataObject) -> int | None:
        pending = self.cluster.network.pending()
        if not pending:
            return None
        return data.draw(st.sampled_from([envelope.sequence for envelope in pending]))

    @rule()
    def tick(self) -> None:
        self.cluster.tick(deliver_due=False)

    @rule(ticks=st.integers(min_value=1, max_value=20))
    def run_normally(self, ticks: int) -> None:
        """Let time pass with the network delivering on schedule: elections and replication
        make progress, so the hand-picked faults have something to break."""
        for _ in range(ticks):
            self.cluster.tick()

    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        sequence = self._pick_pending(data)
        if sequence is not None:
            self.cluster.deliver(self.cluster.network.take(sequence))

    @rule(data=st.data())
    def duplicate(self, data: st.DataObject) -> None:
        sequence = self._pick_pending(data)
        if sequence is None:
            return
        envelope = next(e for e in self.cluster.network.pending() if e.sequence == sequence)
        self.cluster.deliver(envelope)  # delivered now, and still in flight for later

    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        sequence = self._pick_pending(data)
        if sequence is not None:
            self.cluster.drop(self.cluster.network.take(sequence))

    @rule(node_id=st.sampled_from(NODE_IDS), torn=st.booleans())
    def crash(self, node_id: str, torn: bool) -> None:
        if self.cluster.drivers[node_id].is_up:
            self.cluster.crash(node_id, torn)

    @rule(node_id=st.sampled_from(NODE_IDS))
    def restart(self, node_id: str) -> None:
        if not self.cluster.drivers[node_id].is_up:
            self.cluster.restart(node_id)

    @rule(side=st.sets(st.sampled_from(NODE_IDS), min_size=1, max_size=2), one_way=st.booleans())
    def partition(self, side: set[str], one_way: bool) -> None:
        others = [node_id for node_id in NODE_IDS if node_id not in side]
        self.cluster.partition(sorted(side), others, one_way)

    @rule()
    def heal_partitions(self) -> None:
        self.cluster.heal()

    @rule(node_id=st.sampled_from(NODE_IDS))
    def propose(self, node_id: str) -> None:
        if self.cluster.drivers[node_id].is_up:
            now_tick = self.cluster.clock.now_tick
            self.cluster.propose(node_id, self.cluster.workload.new_data(now_tick))

    @rule(count=st.integers(min_value=1, max_value=3))
    def propose_to_leader(self, count: int) -> None:
        leader = self.cluster.leader()
        if leader is None:
            return
        for _ in range(count):
            now_tick = self.cluster.clock.now_tick
            self.cluster.propose(leader, self.cluster.workload.new_data(now_tick))

    @rule(one_way=st.booleans())
    def isolate_leader(self, one_way: bool) -> None:
        leader = self.cluster.leader()
        if leader is not None:
            others = [node_id for node_id in NODE_IDS if node_id != leader]
            self.cluster.partition([leader], others, one_way)

    @rule(torn=st.booleans())
    def crash_leader(self, torn: bool) -> None:
        leader = self.cluster.leader()
        if leader is not None:
            self.cluster.crash(leader, torn)

    @rule(node_id=st.sampled_from(NODE_IDS))
    def change_membership(self, node_id: str) -> None:
        """The leader adds back the node that is not a voter, if any, else removes
        ``node_id``: at most one voter is ever missing, as the durability checker assumes."""
        leader = self.cluster.leader()
        if leader is None:
            return
        node = self.cluster.drivers[leader].node
        assert node is not None
        missing = [other for other in NODE_IDS if other not in node.conf_state.voters]
        if missing:
            change = ConfChange(ConfChangeType.ADD_VOTER, missing[0])
        elif node_id != leader:
            change = ConfChange(ConfChangeType.REMOVE_NODE, node_id)
        else:
            return
        self.cluster.propose_conf_change(leader, change)

    @rule(node_id=st.sampled_from(NODE_IDS))
    def compact(self, node_id: str) -> None:
        if self.cluster.drivers[node_id].is_up:
            self.cluster.compact(node_id)

    @invariant()
    def committed_entries_stay_on_a_majority(self) -> None:
        self.cluster.checker.check_committed_durable()

    def teardown(self) -> None:
        # After a violation a node may be mid-Ready; healing would bury it under a contract
        # error of the harness's own making.
        try:
            if not self.cluster.checker.violated:
                heal(self.cluster)
        finally:
            self.cluster.close()
            shutil.rmtree(self._root_dir, ignore_errors=True)


def test_hypothesis_schedules_keep_raft_safe() -> None:
    run_state_machine_as_test(ClusterMachine, settings=settings.get_profile("sim-default"))


@pytest.mark.slow
def test_hypothesis_schedules_keep_raft_safe_long() -> None:
    run_state_machine_as_test(ClusterMachine, settings=settings.get_profile("sim-slow"))


class SkipLogMatchingMachine(ClusterMachine):
    planted_bugs = frozenset({PlantedBug.SKIP_LOG_MATCHING_CHECK})


def test_hypothesis_schedules_find_a_planted_bug() -> None:
    """The machine's search is strong enough to find a real bug. Derandomized, so it is the
    same search every time; shrinking skipped, for speed."""
    search = settings(
        settings.get_profile("sim-default"),
        max_examples=2000,
        stateful_step_count=100,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
    )
    with pytest.raises(SafetyViolation):
        run_state_machine_as_test(SkipLogMatchingMachine, settings=search)
