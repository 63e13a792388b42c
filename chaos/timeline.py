"""A chaos run's timeline as a PNG: acknowledged sends per second, each fault as a shaded span
labelled with its name and targets, and each change of leader (node, term) as a marker, on one
time axis that starts at the history's first operation.

Rules this module keeps:
- The series come from the history alone, by a pure function (:func:`timeline_of`), so they
  are tested without drawing anything; faults pair up as the checker pairs them (an end closes
  the oldest open start of the same name; a start never ended lasts to the history's end).
- matplotlib is imported only by :func:`write_png`, with the non-interactive Agg backend (it
  is an optional dependency: the ``bench`` and ``dev`` extras); without it, ``write_png``
  raises :class:`TimelineError` saying so, and nothing else in chaos needs it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from raftlog.chaos.history import (
    FAULT_END,
    FAULT_START,
    LEADER_OBSERVED,
    SEND,
    FaultValue,
    LeaderValue,
    Op,
)

_NS_PER_S = 1_000_000_000
_FIGURE_SIZE_IN = (12.0, 4.5)
_DPI = 110


class TimelineError(RuntimeError):
    """The timeline could not be drawn (the message says why)."""


@dataclass(frozen=True, slots=True)
class FaultSpan:
    """A fault from its start to its end, in seconds from the history's start."""

    name: str
    targets: tuple[str, ...]
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class Timeline:
    """What the PNG shows: ``acked_per_s[i]`` acknowledged sends in second ``i``, the faults,
    and ``(time_s, node_id, term)`` whenever the observed leader changed."""

    duration_s: float
    acked_per_s: tuple[int, ...]
    faults: tuple[FaultSpan, ...]
    leaders: tuple[tuple[float, str, int], ...]


def timeline_of(history: Sequence[Op]) -> Timeline:
    """The timeline of ``history`` (an empty one for an empty history)."""
    if not history:
        return Timeline(0.0, (), (), ())
    start_ns = min(op.time_ns for op in history)

    def seconds(time_ns: int) -> float:
        return (time_ns - start_ns) / _NS_PER_S

    duration_s = seconds(max(op.time_ns for op in history))
    acked = Counter(int(seconds(op.time_ns)) for op in history if op.f == SEND and op.type == "ok")
    open_faults: list[tuple[FaultValue, float]] = []
    faults: list[FaultSpan] = []
    leaders: list[tuple[float, str, int]] = []
    for op in sorted(history, key=lambda o: o.time_ns):
        value = op.value
        if op.f == FAULT_START and isinstance(value, FaultValue):
            open_faults.append((value, seconds(op.time_ns)))
        elif op.f == FAULT_END and isinstance(value, FaultValue):
            opened = next((i for i, (v, _) in enumerate(open_faults) if v.name == value.name), None)
            if opened is not None:
                started, start_s = open_faults.pop(opened)
                faults.append(
                    FaultSpan(started.name, started.targets, start_s, seconds(op.time_ns))
                )
        elif (
            op.f == LEADER_OBSERVED
            and isinstance(value, LeaderValue)
            and (not leaders or leaders[-1][1:] != (value.node_id, value.term))
        ):
            leaders.append((seconds(op.time_ns), value.node_id, value.term))
    faults += [FaultSpan(v.name, v.targets, start_s, duration_s) for v, start_s in open_faults]
    per_s = tuple(acked.get(second, 0) for second in range(int(duration_s) + 1))
    return Timeline(
        duration_s, per_s, tuple(sorted(faults, key=lambda f: f.start_s)), tuple(leaders)
    )


def write_png(timeline: Timeline, path: Path, title: str) -> None:
    """Draw ``timeline`` into ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise TimelineError(
            f"the timeline needs matplotlib (pip install 'raftlog[bench]'): {error}"
        ) from None
    figure, axes = plt.subplots(figsize=_FIGURE_SIZE_IN)
    try:
        seconds = [second + 0.5 for second in range(len(timeline.acked_per_s))]
        axes.plot(seconds, timeline.acked_per_s, color="#1f77b4", label="acknowledged sends/s")
        top = max(timeline.acked_per_s, default=1) or 1
        colours = plt.get_cmap("tab10")
        kinds = sorted({fault.name for fault in timeline.faults})
        for fault in timeline.faults:
            colour = colours(1 + kinds.index(fault.name) % 9)
            axes.axvspan(fault.start_s, fault.end_s, color=colour, alpha=0.25)
            label = f"{fault.name} {','.join(fault.targets)}"
            axes.text(fault.start_s, top * 1.02, label, fontsize=7, rotation=20, va="bottom")
        for time_s, node_id, term in timeline.leaders:
            axes.axvline(time_s, color="black", linestyle=":", linewidth=0.8)
            axes.text(time_s, 0, f" {node_id} t{term}", fontsize=7, va="bottom")
        axes.set_xlim(0, max(timeline.duration_s, 1.0))
        axes.set_ylim(0, top * 1.25)
        axes.set_xlabel("seconds since the first operation")
        axes.set_ylabel("acknowledged sends per second")
        axes.set_title(title, fontsize=10)
        axes.legend(loc="lower right", fontsize=8)
        figure.tight_layout()
        figure.savefig(path, dpi=_DPI)
    finally:
        plt.close(figure)
