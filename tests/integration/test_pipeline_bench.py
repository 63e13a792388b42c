"""Smoke test of the Spark pipeline benchmark: ``raftlog bench pipeline --quick`` against a
real local 3-node cluster writes a JSON report with a positive figure for each workload
(raftlog read, Parquet read, raftlog write). It checks that the bench runs end to end, not
how fast anything is. It runs in its own process: the bench starts and stops its own
SparkSession, which must not be the test run's shared one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Slow: its own JVM and cluster (about 2 min on a loaded 2-core box); the source and sink it
# drives are covered by the default pipeline tests, so `make test-slow` runs it.
pytestmark = [pytest.mark.integration, pytest.mark.slow]
RUN_TIMEOUT_S = 600


def test_quick_pipeline_bench_reports_positive_figures(tmp_path: Path) -> None:
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install '.[pipeline]'")
    report_path = tmp_path / "pipeline.json"
    command = [sys.executable, "-m", "raftlog.cli", "bench", "pipeline", "--quick"]
    command += ["--json", str(report_path), "--dir", str(tmp_path / "data")]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert finished.returncode == 0, finished.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["bench"] == "pipeline"
    workloads = {row["workload"] for row in report["measurements"]}
    assert workloads == {"read raftlog", "read parquet", "write raftlog"}
    for row in report["measurements"]:
        assert row["rows"] > 0 and row["seconds"] > 0 and row["rows_per_s"] > 0, row
    summary = report["summary"]
    assert summary["read_raftlog_rows_per_s"] > 0 and summary["write_raftlog_rows_per_s"] > 0
    assert set(report["load_average"]) == {"before", "after"}
