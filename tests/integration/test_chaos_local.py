"""A short chaos run against real local node processes: about 25 s of producers and consumer
groups while the nemesis (seed 7) kills and pauses nodes; the checker must find the run valid,
faults must really have been applied, writes must have been acknowledged around them, and no
node process may be left running."""

from __future__ import annotations

import json
import os
from pathlib import Path

from raftlog.chaos.history import FAULT_START, read_history
from raftlog.chaos.runner import RunConfig, run, write_json
from raftlog.chaos.workload import WorkloadConfig
from raftlog.cli import main

SEED = 7
DURATION_S = 25.0


def _node_pids(data_dir: Path) -> list[int]:
    cluster = json.loads((data_dir / "cluster" / "cluster.json").read_text())
    return [int(n["pid"]) for n in cluster["nodes"] if n.get("pid") is not None]


def test_short_kill_and_pause_run_is_valid(tmp_path: Path) -> None:
    lines: list[str] = []
    config = RunConfig(
        duration_s=DURATION_S,
        faults=("kill", "pause"),
        seed=SEED,
        data_dir=tmp_path / "run",
        workload=WorkloadConfig(seed=SEED),
    )
    result = run(config, out=lines.append)
    print("\n".join(lines))
    print(result.render())
    assert result.valid, result.render()
    assert result.schedule, "the seed's schedule has faults"
    started = [
        op for op in read_history(result.history_path) if op.f == FAULT_START and op.type == "ok"
    ]
    assert len(started) >= 2
    counts = result.report.counts
    assert counts["sends-ok"] > 100, counts
    assert counts["replicas"] == 3
    assert any(r.recovery_ms is not None for r in result.report.recoveries)
    assert _node_pids(result.data_dir) == [], "a node is still recorded as running"
    write_json(result, tmp_path / "run.json")
    assert json.loads((tmp_path / "run.json").read_text())["valid"] is True


def test_containers_target_is_not_available_yet(capsys) -> None:
    assert main(["chaos", "run", "--target", "containers"]) == 2
    assert "not available yet" in capsys.readouterr().err


def test_a_used_data_dir_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "something").write_text("x")
    code = main(["chaos", "run", "--duration", "5s", "--data-dir", str(tmp_path)])
    assert code == 2
    assert "not empty" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["something"]
