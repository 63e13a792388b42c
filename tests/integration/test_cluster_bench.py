"""Smoke test of the cluster benchmark: a ``--quick`` run against a real local 3-node cluster
writes a JSON report with a positive figure for every measured row, in both durability modes.
It checks that the bench runs end to end, not how fast anything is (about 20 s)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("raftlog.node.process") is None,
        reason="raftlog.node.process cannot be imported (the node is not built yet)",
    ),
]


def test_quick_cluster_bench_reports_every_row(tmp_path: Path) -> None:
    from raftlog.bench import cluster

    report_path = tmp_path / "cluster.json"
    code = cluster.main(["--quick", "--json", str(report_path), "--dir", str(tmp_path / "data")])
    assert code == 0
    report = json.loads(report_path.read_text())
    assert report["bench"] == "cluster"
    assert report["machine"]["cpus"]
    rows = report["measurements"]
    expected: set[tuple[object, ...]] = {
        ("produce", durability, body, batch, window)
        for durability in cluster.DURABILITY_MODES
        for body in cluster.BODY_SIZES_BYTES
        for batch in cluster.BATCH_SIZES
        for window in cluster.WINDOWS
    }
    expected |= {
        ("produce-latency", durability, body, client)
        for durability in cluster.DURABILITY_MODES
        for body in cluster.BODY_SIZES_BYTES
        for client in ("grpc-stub", "producer")
    }
    expected |= {
        ("pull", durability, body, role)
        for durability in cluster.DURABILITY_MODES
        for body in cluster.BODY_SIZES_BYTES
        for role in ("leader", "follower")
    }
    seen: set[tuple[object, ...]] = set()
    for row in rows:
        p = row["params"]
        key: tuple[object, ...]
        if row["workload"] == "produce":
            key = ("produce", p["durability"], p["body_bytes"], p["batch_size"], p["window"])
        elif row["workload"] == "produce-latency":
            key = ("produce-latency", p["durability"], p["body_bytes"], p["client"])
            assert row["latency_p50_ms"] > 0, row
            assert row["latency_p99_ms"] >= row["latency_p50_ms"], row
        else:
            key = ("pull", p["durability"], p["body_bytes"], p["from"])
        seen.add(key)
        assert row["messages"] > 0, row
        assert row["seconds"] > 0, row
        assert row["msgs_per_s"] > 0, row
        assert row["mb_per_s"] > 0, row
    assert seen == expected
    assert len(report["best_per_batch"]) == len(cluster.DURABILITY_MODES) * len(
        cluster.BODY_SIZES_BYTES
    ) * len(cluster.BATCH_SIZES)
    # The bench's temporary cluster data is gone, and the nodes it started with it.
    assert not any((tmp_path / "data").iterdir())
