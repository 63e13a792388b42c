"""Counted loss: the acknowledged writes an ASYNC_MASTER group lost, grouped by the fault they
were lost around, with the window in seconds each loss spans.

An ASYNC_MASTER acknowledges a write once it is in its own CommitLog, before any slave has it
(RocketMQ's contract, docs/replication.md). A master that dies, freezes or is cut off before
its slaves copied its tail loses that tail when a slave is elected in its place. The chaos
checker (checker.py) therefore reports such writes for an ASYNC_MASTER run as a count of their
own, not as anomalies; this module says how big each loss was and over how long.

Rules this module keeps:
- Pure: it works on the times the history recorded (no clock, no I/O).
- A lost write is attributed to the first fault still under way or yet to end when it was
  acknowledged (the kill that followed it, or the partition during which the cut-off master
  kept acknowledging); one acknowledged after every fault ended has no fault (``None``).
- A window spans the fault's start and every write lost around it: from the earliest of the
  two to the latest. A kill that took the writes of the last 300 ms with it has a 0.3 s
  window; a partitioned master that kept acknowledging for 0.7 s after the cut, 0.7 s.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

_NS_PER_MS = 1_000_000


class Fault(Protocol):
    """What a loss is attributed to: the checker's FaultRecovery."""

    @property
    def name(self) -> str: ...

    @property
    def targets(self) -> tuple[str, ...]: ...

    @property
    def start_ns(self) -> int: ...

    @property
    def end_ns(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class LossWindow:
    """``lost`` acknowledged writes attributed to one fault (``fault`` None: after every
    fault), acknowledged between ``first_ack_ns`` and ``last_ack_ns``; ``window_ms`` spans
    those and the fault's start."""

    fault: str | None
    targets: tuple[str, ...]
    fault_start_ns: int | None
    lost: int
    first_ack_ns: int
    last_ack_ns: int
    window_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "targets": list(self.targets),
            "fault_start_ns": self.fault_start_ns,
            "lost": self.lost,
            "first_ack_ns": self.first_ack_ns,
            "last_ack_ns": self.last_ack_ns,
            "window_ms": self.window_ms,
        }


def loss_windows(lost_ack_ns: Mapping[str, int], faults: Sequence[Fault]) -> list[LossWindow]:
    """Group the lost writes (value -> when it was acknowledged) by fault, in fault order."""
    ordered = sorted(faults, key=lambda f: f.start_ns)
    # A fault that never ended is under way until the end of the history.
    ends = [f.end_ns if f.end_ns is not None else float("inf") for f in ordered]
    # Faults never overlap, so their ends are in start order; still, make the search safe.
    running_max: list[float] = []
    for end in ends:
        running_max.append(end if not running_max else max(running_max[-1], end))
    groups: dict[int | None, list[int]] = {}
    for ack_ns in lost_ack_ns.values():
        position = bisect.bisect_left(running_max, ack_ns)
        key = position if position < len(ordered) else None
        groups.setdefault(key, []).append(ack_ns)
    windows: list[LossWindow] = []
    for key in sorted(groups, key=lambda k: len(ordered) if k is None else k):
        acks = groups[key]
        first_ns, last_ns = min(acks), max(acks)
        fault = None if key is None else ordered[key]
        start_ns = None if fault is None else fault.start_ns
        low_ns = first_ns if start_ns is None else min(first_ns, start_ns)
        high_ns = last_ns if start_ns is None else max(last_ns, start_ns)
        windows.append(
            LossWindow(
                fault=None if fault is None else fault.name,
                targets=() if fault is None else fault.targets,
                fault_start_ns=start_ns,
                lost=len(acks),
                first_ack_ns=first_ns,
                last_ack_ns=last_ns,
                window_ms=(high_ns - low_ns) / _NS_PER_MS,
            )
        )
    return windows
