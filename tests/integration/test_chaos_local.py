"""Short chaos runs against real local node processes: about 25 s of producers and consumer
groups while the nemesis kills and pauses nodes (seed 7), and kills, pauses and partitions them
through the link proxies (seed 3: a pause, an isolated leader, a kill), in Raft mode and with a
static master-slave group (seed 3 again, the master being the leader). The checker must find
each run valid, every kind of fault asked for must really have been applied, writes must have
been acknowledged around them, and no node process may be left running."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from raftlog.chaos.history import FAULT_START, read_history
from raftlog.chaos.runner import RunConfig, run, write_json
from raftlog.chaos.workload import WorkloadConfig
from raftlog.cli import main

DURATION_S = 25.0


def _node_pids(data_dir: Path) -> list[int]:
    cluster = json.loads((data_dir / "cluster" / "cluster.json").read_text())
    return [int(n["pid"]) for n in cluster["nodes"] if n.get("pid") is not None]


@pytest.mark.parametrize(
    ("faults", "seed", "replication"),
    [
        (("kill", "pause"), 7, "raft"),
        (("kill", "pause", "partition"), 3, "raft"),
        # A static SYNC_MASTER group: the master killed, paused and cut off from its slaves.
        (("kill", "pause", "partition"), 3, "master-slave"),
    ],
    ids=["kill-pause", "kill-pause-partition", "master-slave-kill-pause-partition"],
)
def test_short_run_is_valid(
    faults: tuple[str, ...], seed: int, replication: str, tmp_path: Path
) -> None:
    lines: list[str] = []
    config = RunConfig(
        duration_s=DURATION_S,
        faults=faults,
        seed=seed,
        data_dir=tmp_path / "run",
        replication=replication,
        static=True,  # a master-slave group under a controller: test_master_slave_chaos.py
        partitions="partition" in faults,
        workload=WorkloadConfig(seed=seed),
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
    assert {op.value.name.split("-")[0] for op in started} == set(faults)
    counts = result.report.counts
    assert counts["sends-ok"] > 100, counts
    assert counts["replicas"] == 3
    assert any(r.recovery_ms is not None for r in result.report.recoveries)
    assert _node_pids(result.data_dir) == [], "a node is still recorded as running"
    write_json(result, tmp_path / "run.json")
    assert json.loads((tmp_path / "run.json").read_text())["valid"] is True


def test_containers_target_without_its_image_is_a_usage_error(tmp_path: Path, capsys) -> None:
    code = main(
        [
            "chaos", "run", "--target", "containers", "--image", "raftlog-no-such-image:0",
            "--duration", "5s", "--data-dir", str(tmp_path / "run"),
        ]
    )  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err
    # Without Docker it says so; with Docker it names the missing image.
    assert "needs Docker" in error or "no image 'raftlog-no-such-image:0'" in error, error


def test_a_used_data_dir_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "something").write_text("x")
    code = main(["chaos", "run", "--duration", "5s", "--data-dir", str(tmp_path)])
    assert code == 2
    assert "not empty" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["something"]
