"""A short chaos run against a container cluster: about 40 s of producers and consumer groups
while the nemesis (seed 119) partitions, pauses and kills containers (halves, isolated leader,
bridge: iptables rules in their network namespaces). The checker must find the run
valid, every kind of fault asked for must really have been applied, writes must have been
acknowledged around them, and nothing of the run may be left in Docker."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from raftlog.chaos.container_target import ContainerTarget
from raftlog.chaos.history import FAULT_START, read_history
from raftlog.chaos.runner import RunConfig, run
from raftlog.chaos.workload import WorkloadConfig
from raftlog.testing import leftovers

pytestmark = pytest.mark.containers

SEED = 119
DURATION_S = 40.0


def test_short_kill_pause_partition_run_is_valid(raftlog_image: str, tmp_path: Path) -> None:
    faults = ("kill", "pause", "partition")
    config = RunConfig(
        duration_s=DURATION_S,
        faults=faults,
        seed=SEED,
        data_dir=tmp_path / "run",
        target="containers",
        image=raftlog_image,
        workload=WorkloadConfig(seed=SEED),
    )
    target = ContainerTarget(raftlog_image)
    lines: list[str] = []
    try:
        result = run(config, out=lines.append, target=target)
    finally:
        left = leftovers(target.cluster.run_id)
    print("\n".join(lines))
    print(result.render())
    assert left == [], f"the run left {left} in Docker"
    assert result.valid, result.render()
    started = Counter(
        op.value.name.split("-")[0]
        for op in read_history(result.history_path)
        if op.f == FAULT_START and op.type == "ok"
    )
    assert set(started) == set(faults), f"faults applied: {dict(started)}"
    counts = result.report.counts
    assert counts["sends-ok"] > 100, counts
    assert counts["replicas"] == 3
    assert any(r.recovery_ms is not None for r in result.report.recoveries)


MS_SEED = 19  # 40 s: cut off from its controller first, killed, fenced, killed again


def test_a_sync_master_group_under_its_controller_in_containers(
    raftlog_image: str, tmp_path: Path
) -> None:
    """The master-slave chaos run of tests/integration/test_master_slave_chaos.py, in
    containers: three brokers and three controller members, each its own container on the
    cluster's network; the fencing partition and the controller partition are iptables rules
    in the controller members' and brokers' namespaces. No acknowledged write may be lost."""
    faults = ("kill", "partition", "controller")
    config = RunConfig(
        duration_s=DURATION_S,
        faults=faults,
        seed=MS_SEED,
        data_dir=tmp_path / "run",
        replication="master-slave",
        master_role="SYNC_MASTER",
        target="containers",
        image=raftlog_image,
        workload=WorkloadConfig(seed=MS_SEED),
    )
    target = ContainerTarget(
        raftlog_image, replication="master-slave", master_role="SYNC_MASTER", controlled=True
    )
    assert target.controller_ids == ("c1", "c2", "c3")
    lines: list[str] = []
    try:
        result = run(config, out=lines.append, target=target)
    finally:
        left = leftovers(target.cluster.run_id)
    print("\n".join(lines))
    print(result.render())
    assert left == [], f"the run left {left} in Docker"
    assert result.valid, result.render()
    applied = {
        op.value.name
        for op in read_history(result.history_path)
        if op.f == FAULT_START and op.type == "ok"
    }
    assert {"kill", "partition-isolate-leader", "partition-leader-controller"} <= applied, applied
    counts = result.report.counts
    assert "acked-lost" not in counts  # a SYNC_MASTER is judged strictly
    assert counts["sends-ok"] > 100, counts
    assert counts["replicas"] == 3
    assert any(r.recovery_ms is not None for r in result.report.recoveries)
