"""Smoke test of the latency bench (bench/latency.py): a tiny run against a real local
3-node cluster writes every latency row, the throughput rows and one failover round with
positive figures, and bad arguments are refused. It checks that the bench runs end to end,
not how fast anything is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raftlog.bench import latency


def test_tiny_latency_bench_reports_every_row_and_a_failover(tmp_path: Path) -> None:
    report_path = tmp_path / "latency.json"
    code = latency.main(
        [
            "--samples=20",
            "--max-seconds=2",
            "--throughput-seconds=0.3",
            "--failovers=1",
            "--json",
            str(report_path),
            "--dir",
            str(tmp_path / "data"),
            "--node-arg=--switch-interval-us=5000",
        ]
    )
    assert code == 0
    report = json.loads(report_path.read_text())
    rows = {
        (r["workload"], r["params"]["body_bytes"], r["params"]["client"]): r
        for r in report["measurements"]
    }
    assert set(rows) == {
        *(
            ("produce-latency", body, client)
            for body in latency.BODY_SIZES_BYTES
            for client in ("grpc-stub", "producer")
        ),
        ("produce", 100, "grpc-stub"),
    }
    assert all(r["msgs_per_s"] > 0 for r in rows.values())
    assert all(r["latency_p50_ms"] > 0 for k, r in rows.items() if k[0] == "produce-latency")
    (failover,) = report["failovers"]
    assert 0 < failover["to_first_ack_ms"] < latency.FAILOVER_TIMEOUT_S * 1000
    assert report["node_args"] == ["--switch-interval-us=5000"]
    assert report["code"] == ["this checkout"]
    assert {r["params"]["code"] for r in report["measurements"]} == {"this checkout"}


@pytest.mark.parametrize("arguments", [["--failovers=51"], ["--rounds=0"], ["--code=/nonexistent"]])
def test_bad_arguments_are_refused(arguments: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        latency.main(arguments)
    assert exit_info.value.code == 2
