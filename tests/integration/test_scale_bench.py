"""Smoke test of the scale benchmark (``raftlog bench scale``) with tiny sizes: every part runs
end to end on real local clusters and reports its figures, the restart is split by the node's
own log lines, and a graceful restart replays nothing (the applied-state checkpoint). It
checks that the bench works, not how fast anything is (about 30 s, so marked slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_tiny_scale_run_reports_every_part(tmp_path: Path) -> None:
    from raftlog.bench import scale

    report_path = tmp_path / "scale.json"
    code = scale.main(
        [
            "--restart-gib", "0.01", "--catchup-gib", "0.01", "--stored-gib", "0.02",
            "--queues", "50", "--max-seconds", "0.5", "--queue-rounds", "2",
            "--restart-rounds", "1", "--timeout", "120", "--fill-seconds", "120",
            "--dir", str(tmp_path / "data"), "--json", str(report_path),
        ]
    )  # fmt: skip
    report = json.loads(report_path.read_text())
    assert code == 0, report["failures"]
    figures = {(f["part"], f["name"]): f for f in report["figures"]}
    assert {part for part, _ in figures} == set(scale.PARTS)
    assert all(f["value"] > 0 and len(f["load"]) == 3 for f in figures.values())
    graceful = figures[("restart", "restart after SIGTERM")]["detail"]
    assert graceful["caught_up_s"] >= graceful["serving_s"] > 0
    assert {"store_open_s", "raft_log_open_s", "interpreter_and_settings_s"} <= set(graceful)
    assert "replay_entries" not in graceful  # the checkpoint: nothing applied twice
    assert ("catchup", "new member (--join): MB/s to caught up") in figures
    assert not list((tmp_path / "data").iterdir())  # the temporary data is gone
