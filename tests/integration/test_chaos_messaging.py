"""Chaos runs with messaging traffic mixed in: delayed sends (a level and a delivery time),
ordered sends read by an orderly group, transactions (commit, rollback, unknown then committed
by the check-back) and reconsume-later, next to the plain producers and groups, while the
nemesis kills and pauses nodes (the leader among them). Both checkers must find the run valid,
and each kind of messaging traffic must have been acknowledged and delivered. The short run
fits in a minute (``make test``); the longer one is marked slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raftlog.chaos.history import FAULT_START, read_history
from raftlog.chaos.messaging_workload import MessagingConfig
from raftlog.chaos.runner import RunConfig, run, write_json
from raftlog.chaos.workload import WorkloadConfig


def _run_and_check(duration_s: float, seed: int, tmp_path: Path, *, leader_hit: bool) -> None:
    lines: list[str] = []
    config = RunConfig(
        duration_s=duration_s,
        faults=("kill", "pause"),
        seed=seed,
        data_dir=tmp_path / "run",
        workload=WorkloadConfig(seed=seed, producers=2, groups=1),
        messaging=MessagingConfig(drain_timeout_s=20.0),
    )
    result = run(config, out=lines.append)
    print("\n".join(lines))
    print(result.render())
    assert result.valid, result.render()
    assert result.messaging_report is not None
    started = [
        op for op in read_history(result.history_path) if op.f == FAULT_START and op.type == "ok"
    ]
    assert {op.value.name.split("-")[0] for op in started} == {"kill", "pause"}
    if leader_hit:  # the seed's schedule pauses the leader, then kills the (new) leader
        assert {f.kind for f in result.schedule if f.targets == ("leader",)} == {"kill", "pause"}
    counts = result.messaging_report.counts
    assert counts["delayed-send-ok"] > 10, counts
    assert counts["delayed-delivered"] >= counts["delayed-send-ok"], counts
    assert counts["ordered-send-ok"] > 10 and counts["ordered-received"] > 10, counts
    assert counts["txn-committed"] > 3 and counts["txn-rolled-back"] > 3, counts
    assert counts["reconsume-later-ok"] > 3 and counts["reconsumed"] > 3, counts
    assert result.messaging_report.max_lateness_ms is not None
    write_json(result, tmp_path / "run.json")
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["messaging_report"]["valid"] is True


def test_short_run_with_messaging_is_valid(tmp_path: Path) -> None:
    _run_and_check(20.0, 7, tmp_path, leader_hit=True)


@pytest.mark.slow
def test_long_run_with_messaging_is_valid(tmp_path: Path) -> None:
    _run_and_check(90.0, 11, tmp_path, leader_hit=False)
