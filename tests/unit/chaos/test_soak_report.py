"""chaos/soak_report.py: many runs' JSON into one table; failover counts only kills of the
leader, paired with recoveries in schedule order."""

from __future__ import annotations

import json
from pathlib import Path

from raftlog.chaos.soak_report import render, summarize_run


def _run(
    path: Path, seed: int, valid: bool, schedule: list[dict], recoveries: list[float | None]
) -> Path:
    document = {
        "seed": seed,
        "valid": valid,
        "schedule": schedule,
        "report": {
            "anomalies": [] if valid else [{"kind": "lost"}],
            "counts": {"sends-ok": 100},
            "recoveries": [{"recovery_ms": ms} for ms in recoveries],
        },
    }
    path.write_text(json.dumps(document))
    return path


def test_failover_is_the_leader_kills_only(tmp_path: Path) -> None:
    kill_leader = {"kind": "kill", "targets": ["leader"]}
    kill_other = {"kind": "kill", "targets": ["n2"]}
    pause = {"kind": "pause", "targets": ["leader"]}
    first = summarize_run(_run(tmp_path / "1.json", 1, True, [kill_leader, pause], [1800.0, 900.0]))
    second = summarize_run(
        _run(tmp_path / "2.json", 2, False, [kill_other, kill_leader], [5.0, 2200.0])
    )
    assert first.leader_kill_recoveries_ms == (1800.0,)
    assert second.leader_kill_recoveries_ms == (2200.0,)
    table = render([first, second])
    assert "runs: 2, valid: 1, anomalies: 1" in table
    assert "median 2.00 s, max 2.20 s, over 2 kills" in table


def test_counted_loss_is_summed_with_the_longest_window(tmp_path: Path) -> None:
    path = _run(tmp_path / "3.json", 3, True, [], [])
    document = json.loads(path.read_text())
    document["report"]["counts"]["acked-lost"] = 7
    document["report"]["losses"] = [{"window_ms": 120.0}, {"window_ms": 430.0}]
    path.write_text(json.dumps(document))
    lossy = summarize_run(path)
    clean = summarize_run(_run(tmp_path / "4.json", 4, True, [], []))
    assert (lossy.acked_lost, lossy.longest_loss_window_ms) == (7, 430.0)
    table = render([lossy, clean])
    assert "| 3 | yes | 0 | 100 | 7 (0.43 s) | - |" in table
    assert "7 writes in 1 runs, longest window 0.43 s" in table
