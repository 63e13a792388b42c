"""The Raft core benchmark runs end to end (quick mode) and writes its JSON document."""

from __future__ import annotations

import json
from pathlib import Path

from raftlog.bench import raft as raft_bench


def test_quick_bench_reports_every_batch_size(tmp_path: Path) -> None:
    output = tmp_path / "raft.json"
    assert raft_bench.main(["--quick", "--json", str(output)]) == 0
    document = json.loads(output.read_text(encoding="utf-8"))
    measurements = document["measurements"]
    assert [row["params"]["batch_size"] for row in measurements] == list(raft_bench.BATCH_SIZES)
    assert all(row["entries"] > 0 and row["entries_per_s"] > 0 for row in measurements)
