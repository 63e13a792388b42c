"""A short chaos run against a master-slave group under its controller, all real processes on
127.0.0.1 (three brokers, three controller members): producers and consumer groups while the
nemesis isolates the master from everyone (slaves and controller: the fencing partition), kills
it, and cuts it off from its controller alone (seed 25). The checker must find no acknowledged
write lost, duplicated or reordered, and writes must resume after each fault; no process may be
left running. An ASYNC_MASTER group under the same faults may lose acknowledged writes: they
must be counted (with their windows), and nothing else may go wrong."""

from __future__ import annotations

import json
from pathlib import Path

from raftlog.chaos.runner import RunConfig, RunResult, run
from raftlog.chaos.workload import WorkloadConfig
from raftlog.testing.node_probes import alive


def _run(tmp_path: Path, master_role: str) -> RunResult:
    """Seed 25 for 30 s: the fencing partition, a kill, a controller partition."""
    lines: list[str] = []
    config = RunConfig(
        duration_s=30.0,
        faults=("kill", "pause", "partition", "controller"),
        seed=25,
        data_dir=tmp_path / "run",
        replication="master-slave",
        master_role=master_role,
        partitions=True,
        workload=WorkloadConfig(seed=25),
    )
    result = run(config, out=lines.append)
    print("\n".join(lines))
    print(result.render())
    # Counted loss (an ASYNC_MASTER's) is not an anomaly; anything else is.
    assert result.valid, result.render()
    assert result.report.counts["sends-ok"] > 100, result.report.counts
    return result


def test_a_sync_master_group_under_its_controller_survives_chaos(tmp_path: Path) -> None:
    result = _run(tmp_path, "SYNC_MASTER")
    planned = [fault.kind for fault in result.schedule]
    assert "partition-leader-controller" in planned and "partition-isolate-leader" in planned
    assert not [w for w in result.warnings if w.startswith("nemesis")], result.warnings
    assert result.report.counts["replicas"] == 3
    assert "acked-lost" not in result.report.counts  # judged strictly: none may be lost
    recoveries = [r.recovery_ms for r in result.report.recoveries if r.recovery_ms is not None]
    assert recoveries, "no write was acknowledged after a fault"
    state = json.loads((result.data_dir / "cluster" / "cluster.json").read_text())
    pids = [n["pid"] for n in state["nodes"]] + [c["pid"] for c in state["controllers"]]
    assert not [pid for pid in pids if pid is not None and alive(pid)]


def test_an_async_master_group_counts_what_a_failover_takes_back(tmp_path: Path) -> None:
    report = _run(tmp_path, "ASYNC_MASTER").report
    # The isolated master acknowledges until its lease runs out: those writes are lost.
    assert report.counts["acked-lost"] > 0 and "commits-lost" in report.counts
    assert report.counts["acked-lost"] == sum(w.lost for w in report.losses)
