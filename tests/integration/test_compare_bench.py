"""Smoke tests of the side-by-side bench (``raftlog bench compare --quick``): each system's
side runs end to end against real local servers and reports every figure with a positive
value. They check that the bench works, not how fast anything is.

The NATS side needs nats-server: the test installs it through the bench's own installer
(Debian's package) and is skipped, saying why, when that is impossible on this machine."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("nats") is None, reason="nats-py is not installed"),
]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _figures(report: dict[str, object], system: str) -> dict[tuple[object, ...], float]:
    figures = report["figures"]
    assert isinstance(figures, list)
    return {
        (f["figure"], f["durability"], f["body_bytes"], f["queue_count"]): f[system]
        for f in figures
        if f[system] is not None
    }


def _both_systems_figures() -> set[tuple[object, ...]]:
    """The figures both systems report in a --quick run (the fsync pairing only)."""
    from raftlog.bench import compare_rounds
    from raftlog.bench.cluster import BODY_SIZES_BYTES

    expected: set[tuple[object, ...]] = {
        (name, "fsync", body, None)
        for name in ("produce", "latency-p50", "latency-p99", "consume")
        for body in BODY_SIZES_BYTES
    }
    return expected | {("failover", "fsync", compare_rounds.FAILOVER_BODY_BYTES, None)}


def _raw_path_figures() -> set[tuple[object, ...]]:
    """raftlog's raw-path rows (the gRPC stub), labelled apart from the typed client's."""
    from raftlog.bench.cluster import BODY_SIZES_BYTES

    return {
        (name, "fsync", body, None)
        for name in ("produce-raw", "latency-raw-p50", "latency-raw-p99")
        for body in BODY_SIZES_BYTES
    }


def test_quick_compare_raftlog_side(tmp_path: Path) -> None:
    from raftlog.bench import compare, compare_rounds

    report_path = tmp_path / "compare.json"
    chart_path = tmp_path / "compare.png"
    code = compare.main(
        [
            "--quick",
            "--systems",
            "raftlog",
            "--modes",
            "raft,sync-master,async-master",
            "--json",
            str(report_path),
            "--chart",
            str(chart_path),
            "--dir",
            str(tmp_path / "data"),
        ]
    )
    assert code == 0
    report = json.loads(report_path.read_text())
    assert report["bench"] == "compare"
    figures = _figures(report, "raftlog")
    expected = _both_systems_figures() | _raw_path_figures()
    expected |= {
        ("failover-pause", "fsync", compare_rounds.FAILOVER_BODY_BYTES, None),
    }
    expected |= {
        ("queues", "fsync", compare_rounds.QUEUE_BODY_BYTES, n)
        for n in compare_rounds.QUICK_QUEUE_COUNTS
    }
    assert set(figures) == expected
    assert all(value > 0 for value in figures.values()), figures
    assert not _figures(report, "nats"), "NATS was not asked for"
    targets = {t["target"] for t in report["targets"]}
    assert {"leader killed: first ack <= 0.1 s", "leader frozen: first ack <= 1.5 s"} <= targets
    # The master-slave modes, beside Raft mode on the same workloads (failover: Raft only).
    for mode in ("sync-master", "async-master"):
        moded = {
            (f["figure"], f["body_bytes"]): f["modes"][mode]
            for f in report["figures"]
            if mode in f["modes"]
        }
        expected_modes = _both_systems_figures() | _raw_path_figures()
        assert set(moded) == {(k[0], k[2]) for k in expected_modes if k[0] != "failover"}
        assert all(value > 0 for value in moded.values()), moded
        assert any(t.startswith(f"{mode} produce") for t in targets)
    assert report["versions"]["nats-server"] == "not used"
    assert chart_path.read_bytes().startswith(PNG_SIGNATURE)
    assert not any((tmp_path / "data").iterdir()), "the bench removes its clusters' data"


def test_quick_compare_nats_side(tmp_path: Path) -> None:
    from raftlog.bench import compare
    from raftlog.bench.nats_install import NatsUnavailable, system_nats

    try:
        binary = system_nats()
    except NatsUnavailable as error:
        pytest.skip(f"nats-server cannot be installed here: {error}")
    report_path = tmp_path / "compare.json"
    code = compare.main(
        [
            "--quick",
            "--systems",
            "nats",
            "--nats",
            "system",
            "--json",
            str(report_path),
            "--dir",
            str(tmp_path / "data"),
        ]
    )
    assert code == 0
    report = json.loads(report_path.read_text())
    figures = _figures(report, "nats")
    assert set(figures) == _both_systems_figures()
    assert all(value > 0 for value in figures.values()), figures
    assert report["versions"]["nats-server"] == binary.version
    if not binary.has_sync_interval:
        assert any("sync_interval" in w for w in report["warnings"]), report["warnings"]
    assert not any((tmp_path / "data").iterdir()), "the bench removes its servers' data"
