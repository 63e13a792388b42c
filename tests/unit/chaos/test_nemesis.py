"""The nemesis schedule: the same seed gives the same schedule, different seeds differ, faults
stay within their bounds (hold 1-5 s, a quiet gap between faults, nothing after the duration's
quiet tail), only the asked-for kinds appear; partition links; and the nemesis thread applied to
a fake target records each fault's start and end and heals everything at the end."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from raftlog.chaos.history import FAULT_END, FAULT_START, FaultValue, Recorder
from raftlog.chaos.nemesis import (
    FREEZE_LEADER,
    KILL,
    LATENCY_LEADER,
    MAX_FREEZE_S,
    MAX_HOLD_S,
    MIN_FREEZE_S,
    MIN_GAP_S,
    MIN_HOLD_S,
    PARTITION_ISOLATE_LEADER,
    PARTITION_KINDS,
    PARTITION_LEADER_CLIENTS,
    PARTITION_LEADER_CONTROLLER,
    PAUSE,
    QUIET_TAIL_S,
    ROLLING_RESTART,
    Nemesis,
    PlannedFault,
    describe,
    fault_kinds,
    plan,
)
from raftlog.chaos.target import Link, NodeView, TargetError, partition_links
from raftlog.client import Connection

NODES = ["n1", "n2", "n3"]


def test_same_seed_same_schedule() -> None:
    for seed in range(20):
        first = plan(seed, 300.0, ["kill", "pause", "partition"], NODES)
        again = plan(seed, 300.0, ["kill", "pause", "partition"], NODES)
        assert first == again
        assert describe(first, seed) == describe(again, seed)


def test_different_seeds_differ() -> None:
    schedules = {tuple(plan(seed, 120.0, ["kill", "pause"], NODES)) for seed in range(20)}
    assert len(schedules) > 15


def test_faults_are_bounded_and_do_not_overlap() -> None:
    for seed in range(50):
        schedule = plan(seed, 120.0, ["kill", "pause", "partition", "rolling-restart"], NODES)
        assert schedule, seed
        end_s = 0.0
        for fault in schedule:
            assert MIN_HOLD_S <= fault.hold_s <= MAX_HOLD_S
            assert fault.at_s >= end_s + MIN_GAP_S - 0.01 or end_s == 0.0
            busy_s = 9.0 if fault.kind == ROLLING_RESTART else fault.hold_s
            end_s = fault.at_s + busy_s
            assert end_s <= 120.0 - QUIET_TAIL_S + 1e-9


def test_only_the_named_kinds_appear() -> None:
    kinds = {f.kind for seed in range(30) for f in plan(seed, 200.0, ["kill"], NODES)}
    assert kinds == {KILL}
    kinds = {f.kind for seed in range(30) for f in plan(seed, 200.0, ["partition"], NODES)}
    assert kinds == set(PARTITION_KINDS)


def test_unknown_fault_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        fault_kinds(["kill", "flood"])


def test_a_short_run_has_no_fault() -> None:
    assert plan(1, 5.0, ["kill"], NODES) == []


def test_partition_links() -> None:
    assert partition_links(NODES, [["n1"], ["n2", "n3"]]) == {
        ("n1", "n2"),
        ("n2", "n1"),
        ("n1", "n3"),
        ("n3", "n1"),
    }
    # A bridge: n2 is on both sides, so only n1 <-> n3 is cut.
    assert partition_links(NODES, [["n1", "n2"], ["n2", "n3"]]) == {("n1", "n3"), ("n3", "n1")}


class FakeTarget:
    """Records the calls; n1 leads."""

    name = "fake"
    supports_partitions = True
    supports_latency = True
    supports_client_partitions = True
    controller_ids: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def node_ids(self) -> list[str]:
        return list(NODES)

    def connect(self) -> Connection:  # pragma: no cover - the nemesis opens no client
        raise AssertionError("the nemesis must not open a client connection")

    def start(self) -> None: ...

    def close(self) -> None: ...

    def kill(self, node_id: str) -> None:
        self.calls.append(("kill", node_id))

    def restart(self, node_id: str) -> None:
        self.calls.append(("restart", node_id))

    def pause(self, node_id: str) -> None:
        if node_id == "n3":
            raise TargetError("n3 is not running")
        self.calls.append(("pause", node_id))

    def resume(self, node_id: str) -> None:
        self.calls.append(("resume", node_id))

    def block(self, links: Collection[Link], *, silent: bool = False) -> None:
        mode = "silent" if silent else "refuse"
        self.calls.append(("block", mode, *sorted(f"{a}>{b}" for a, b in links)))

    def delay(self, links: Collection[Link], delay_ms: int) -> None:
        self.calls.append(("delay", str(delay_ms), *sorted(f"{a}>{b}" for a, b in links)))

    def heal(self) -> None:
        self.calls.append(("heal",))

    def status(self, node_id: str) -> NodeView | None:
        role = "leader" if node_id == "n1" else "follower"
        return NodeView(node_id, role, 3, "n1", 0, 0, 0)

    def read_replica(self, node_id: str, topic: str):  # pragma: no cover - unused
        raise NotImplementedError


def test_nemesis_applies_records_and_heals() -> None:
    target = FakeTarget()
    recorder = Recorder()
    schedule = [
        PlannedFault(0.0, KILL, 0.01, ("leader",)),
        PlannedFault(0.0, PAUSE, 0.01, ("n3",)),  # refused by the target: a failed start
        PlannedFault(0.0, "partition-one-way", 0.01, ("leader", "n1")),
        PlannedFault(0.0, ROLLING_RESTART, 0.0, ("n1", "n2")),
    ]
    Nemesis(target, recorder, schedule).run(0.0)
    assert target.calls == [
        ("kill", "n1"),
        ("restart", "n1"),
        ("block", "silent", "n1>n2"),
        ("heal",),
        ("restart", "n1"),
        ("restart", "n2"),
    ]
    events = [(op.type, op.f, op.value) for op in recorder.ops()]
    assert events == [
        ("ok", FAULT_START, FaultValue(KILL, ("n1",))),
        ("ok", FAULT_END, FaultValue(KILL, ("n1",))),
        ("fail", FAULT_START, FaultValue(PAUSE, ("n3",))),
        ("ok", FAULT_START, FaultValue("partition-one-way", ("n1", "n2"))),
        ("ok", FAULT_END, FaultValue("partition-one-way", ("n1", "n2"))),
        ("ok", FAULT_START, FaultValue(ROLLING_RESTART, ("n1", "n2"))),
        ("ok", FAULT_END, FaultValue(ROLLING_RESTART, ("n1", "n2"))),
    ]


def test_latency_slows_every_link_of_the_leader_then_heals() -> None:
    target = FakeTarget()
    recorder = Recorder()
    Nemesis(target, recorder, [PlannedFault(0.0, LATENCY_LEADER, 0.01, ("leader",), 120)]).run(0.0)
    assert target.calls == [
        ("delay", "120", "n1>n2", "n1>n3", "n2>n1", "n3>n1"),
        ("heal",),
    ]
    assert [(op.f, op.value) for op in recorder.ops()] == [
        (FAULT_START, FaultValue(LATENCY_LEADER, ("n1",))),
        (FAULT_END, FaultValue(LATENCY_LEADER, ("n1",))),
    ]


def test_controller_partitions_cut_the_master_off_from_its_controller() -> None:
    target = FakeTarget()
    target.controller_ids = ("c1", "c2")
    schedule = [
        PlannedFault(0.0, PARTITION_LEADER_CONTROLLER, 0.01, ("leader",)),
        PlannedFault(0.0, PARTITION_ISOLATE_LEADER, 0.01, ("leader",)),
    ]
    Nemesis(target, Recorder(), schedule).run(0.0)
    assert target.calls == [
        ("block", "silent", "n1>c1", "n1>c2"),  # the slaves and clients still reach it
        ("heal",),
        ("block", "silent", "n1>c1", "n1>c2", "n1>n2", "n1>n3", "n2>n1", "n3>n1"),
        ("heal",),
    ]


def test_a_clients_partition_cuts_only_the_clients_off_the_leader() -> None:
    target = FakeTarget()
    schedule = [PlannedFault(0.0, PARTITION_LEADER_CLIENTS, 0.01, ("leader",))]
    Nemesis(target, Recorder(), schedule).run(0.0)
    assert target.calls == [("block", "silent", "client>n1"), ("heal",)]
    assert fault_kinds(["clients"]) == [PARTITION_LEADER_CLIENTS]
    assert PARTITION_LEADER_CLIENTS not in fault_kinds(["partition", "controller"])


def test_a_freeze_stops_the_leader_for_longer_and_resumes_it() -> None:
    target = FakeTarget()
    Nemesis(target, Recorder(), [PlannedFault(0.0, FREEZE_LEADER, 0.01, ("leader",))]).run(0.0)
    assert target.calls == [("pause", "n1"), ("resume", "n1")]
    holds = [f.hold_s for f in plan(5, 600.0, ["freeze"], NODES)]
    assert holds and all(MIN_FREEZE_S <= h <= MAX_FREEZE_S for h in holds)


def test_a_controller_partition_without_controllers_is_not_applied() -> None:
    recorder = Recorder()
    fault = PlannedFault(0.0, PARTITION_LEADER_CONTROLLER, 0.01, ("leader",))
    nemesis = Nemesis(FakeTarget(), recorder, [fault])
    nemesis.run(0.0)
    assert [(op.type, op.f) for op in recorder.ops()] == [("fail", FAULT_START)]
    assert "no controller member" in nemesis.errors[0]


def test_the_controller_family_is_its_own_name() -> None:
    # Kept out of "partition", so the schedules of existing seeds stay as they were.
    assert fault_kinds(["controller"]) == [PARTITION_LEADER_CONTROLLER]
    assert PARTITION_LEADER_CONTROLLER not in fault_kinds(["partition"])


def test_latency_delays_are_seeded_and_bounded() -> None:
    schedule = plan(11, 300.0, ["latency"], NODES)
    assert schedule and schedule == plan(11, 300.0, ["latency"], NODES)
    assert all(20 <= f.delay_ms <= 200 for f in schedule)
    assert len({f.delay_ms for f in schedule}) > 1
    assert "(+" in schedule[0].describe()


def test_adding_latency_keeps_other_schedules() -> None:
    # The delay is drawn only for latency faults: seeds used by CI keep their schedules.
    without = plan(7, 60.0, ["kill", "pause"], NODES)
    assert all(f.delay_ms == 0 for f in without)
    assert [f.kind for f in plan(3, 25.0, ["kill", "pause", "partition"], NODES)] == [
        PAUSE,
        "partition-isolate-leader",
        KILL,
    ]
