"""The seeded fuzzer (tests/support/fuzzer.py) against a real local 3-node cluster, with a
small budget: no INTERNAL/UNKNOWN, no hang, no term change, every node serving, no traceback
in a log, and every node stopping gracefully after (no abort file). ``make fuzz`` runs it
for longer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.fuzzer import run_against_local_cluster

pytestmark = pytest.mark.integration

FUZZ_SEED = int(os.environ.get("FUZZ_SEED", "16"))


def test_fuzz_every_method_of_every_node(tmp_path: Path) -> None:
    report = run_against_local_cluster(
        str(tmp_path / "data"), FUZZ_SEED, max_calls=300, budget_s=25.0
    )
    assert report.calls >= 50, report.summary()
    assert not report.findings, "\n".join([report.summary(), *report.findings])
