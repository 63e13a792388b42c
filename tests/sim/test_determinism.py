"""One seed, one run: the same seed gives an identical trace, in this process or another one
with a different string-hash seed; another seed takes another path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .simulation import run_simulation

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_same_seed_replays_an_identical_trace() -> None:
    first = run_simulation(7)
    second = run_simulation(7)
    assert first.event_count == second.event_count
    assert first.trace_digest == second.trace_digest


def test_different_seeds_take_different_paths() -> None:
    assert run_simulation(7).trace_digest != run_simulation(8).trace_digest


def _digest_in_subprocess(seed: int, hash_seed: str) -> str:
    environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
    script = (
        "from tests.sim.simulation import run_simulation; "
        f"print(run_simulation({seed}).trace_digest)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return completed.stdout.strip()


def test_trace_does_not_depend_on_string_hash_randomization() -> None:
    assert _digest_in_subprocess(3, "1") == _digest_in_subprocess(3, "2")
