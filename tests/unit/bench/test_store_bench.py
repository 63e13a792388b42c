"""The store benchmark still runs end to end and reports every workload (a smoke run, not a
timed test: it asserts that figures exist, never how large they are)."""

from __future__ import annotations

import json
from pathlib import Path

from raftlog.bench import store as bench_store


def test_quick_store_bench_reports_every_workload(tmp_path: Path) -> None:
    report_path = tmp_path / "store.json"
    exit_code = bench_store.main(
        ["--quick", "--json", str(report_path), "--dir", str(tmp_path / "data")]
    )
    assert exit_code == 0
    report = json.loads(report_path.read_text())
    workloads = {m["workload"] for m in report["measurements"]}
    assert workloads == {"raw-ceiling", "store-append", "store-append-encoded", "pull"}
    assert all(m["messages"] > 0 and m["msgs_per_s"] > 0 for m in report["measurements"])
    queue_counts = {m["params"].get("queue_count") for m in report["measurements"]}
    assert {1, 10_000} <= queue_counts
    assert report["ratios"], "the target ratios are computed"
    assert not any((tmp_path / "data").iterdir()), "the bench removes what it wrote"
