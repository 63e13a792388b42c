"""What every benchmark shares: its time/count budget, the bounded loop, and the JSON report.

Rules this module keeps:
- Every measured loop stops at whichever comes first: ``Budget.max_count`` items or
  ``Budget.max_seconds`` of wall time.
- A JSON report carries the machine it ran on, the budget, the repeat count and every
  measurement with its parameters, so two runs can be compared field by field.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Budget:
    """How long each measurement may run: whichever limit comes first ends it."""

    max_count: int
    max_seconds: float


def run_bounded(step: Callable[[], int], budget: Budget) -> tuple[int, float]:
    """Call ``step`` (which returns how many items it handled) until a budget limit is hit;
    returns (items handled, seconds taken)."""
    done = 0
    start = time.perf_counter()
    deadline = start + budget.max_seconds
    while done < budget.max_count and time.perf_counter() < deadline:
        done += step()
    return done, time.perf_counter() - start


def machine_description() -> dict[str, object]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def write_json_report(
    path: str,
    bench: str,
    budget: Budget,
    repeats: int,
    measurements: Sequence[Any],
    **extra: object,
) -> None:
    """Write ``measurements`` (dataclass instances) and ``extra`` sections as one document."""
    document = {
        "bench": bench,
        "machine": machine_description(),
        "budget": asdict(budget),
        "repeats": repeats,
        "measurements": [asdict(measurement) for measurement in measurements],
        **extra,
    }
    with open(path, "w", encoding="utf-8") as out:
        json.dump(document, out, indent=2)
