"""A chaos run's timeline as a PNG: acknowledged sends per second, each fault as a shaded span
labelled with its name and targets (``(leader)`` after the target that led when it was hit),
and each change of leader (node, term) as a marker, on one time axis that starts at the
history's first operation.

Rules this module keeps:
- The series come from the history alone, by a pure function (:func:`timeline_of`), so they
  are tested without drawing anything; faults pair up as the checker pairs them (an end closes
  the oldest open start of the same name; a start never ended lasts to the history's end).
- Sends are counted in whole seconds only, up to the last send (invoked or completed): the
  workload rarely stops on a second's boundary, and its last, partial second (or the quiet
  seconds after it, while the run heals and reads the replicas) counted as whole ones would
  draw a drop to zero that never happened. An outage at the end still shows: sends keep
  being invoked and failing.
- "The leader" when a fault starts is the history's own view: the observed leader claim of the
  highest term so far (the latest one, on a tie). It can lag a change the observer has not
  polled yet, so the label says what the history shows, not more.
- Labels never overlap: fault labels, then leader labels, are stacked in rows above the data
  (:func:`stack_rows`; widths estimated from the text length), and the figure grows a row's
  height for each row, so the plot itself keeps its size.
- matplotlib is imported only by :func:`write_png`, with the non-interactive Agg backend (it
  is an optional dependency: the ``bench`` and ``dev`` extras); without it, ``write_png``
  raises :class:`TimelineError` saying so, and nothing else in chaos needs it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
_PT_PER_IN = 72.0
_DPI = 110
_FIGURE_WIDTH_IN = 12.0
_DATA_HEIGHT_IN = 3.2  # the plot's own height, whatever the number of label rows
_ROW_HEIGHT_IN = 0.24  # one row of labels (9 pt text and its padding)
_MARGINS_IN = {"left": 0.8, "right": 0.25, "bottom": 0.6, "top": 0.85}  # top: title, legend
_FAULT_FONT_PT = 8.0
_LEADER_FONT_PT = 9.5
# DejaVu Sans' mean advance width, in font sizes, plus a small gap: a label's estimated width.
_CHAR_WIDTH_EM = 0.62
_LABEL_GAP_EM = 1.0
_DATA_HEADROOM = 1.05  # the highest rate sits this far below the first row of labels


class TimelineError(RuntimeError):
    """The timeline could not be drawn (the message says why)."""


@dataclass(frozen=True, slots=True)
class FaultSpan:
    """A fault from its start to its end, in seconds from the history's start; ``leader``: the
    node the history saw leading when it started (None before any leader was seen)."""

    name: str
    targets: tuple[str, ...]
    start_s: float
    end_s: float
    leader: str | None = None

    @property
    def label(self) -> str:
        """``"kill n1 (leader)"``: the name and targets, the leader among them marked."""
        targets = [f"{t} (leader)" if t == self.leader else t for t in self.targets]
        return f"{self.name} {','.join(targets)}"


@dataclass(frozen=True, slots=True)
class Timeline:
    """What the PNG shows: ``acked_per_s[i]`` acknowledged sends in second ``i`` (the whole
    seconds up to the last send), the faults, and ``(time_s, node_id, term)`` whenever the
    observed leader changed."""

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
    sends_end_s = seconds(max((op.time_ns for op in history if op.f == SEND), default=start_ns))
    acked = Counter(int(seconds(op.time_ns)) for op in history if op.f == SEND and op.type == "ok")
    open_faults: list[tuple[FaultValue, float, str | None]] = []
    faults: list[FaultSpan] = []
    leaders: list[tuple[float, str, int]] = []
    leading: LeaderValue | None = None  # the claim of the highest term so far
    for op in sorted(history, key=lambda o: o.time_ns):
        value = op.value
        if op.f == FAULT_START and isinstance(value, FaultValue):
            leader = None if leading is None else leading.node_id
            open_faults.append((value, seconds(op.time_ns), leader))
        elif op.f == FAULT_END and isinstance(value, FaultValue):
            opened = next(
                (i for i, (v, *_) in enumerate(open_faults) if v.name == value.name), None
            )
            if opened is not None:
                started, start_s, leader = open_faults.pop(opened)
                end_s = seconds(op.time_ns)
                faults.append(FaultSpan(started.name, started.targets, start_s, end_s, leader))
        elif op.f == LEADER_OBSERVED and isinstance(value, LeaderValue):
            if leading is None or value.term >= leading.term:
                leading = value
            if not leaders or leaders[-1][1:] != (value.node_id, value.term):
                leaders.append((seconds(op.time_ns), value.node_id, value.term))
    faults += [FaultSpan(v.name, v.targets, s, duration_s, lead) for v, s, lead in open_faults]
    per_s = tuple(acked.get(second, 0) for second in range(int(sends_end_s)))
    return Timeline(
        duration_s, per_s, tuple(sorted(faults, key=lambda f: f.start_s)), tuple(leaders)
    )


def stack_rows(spans: Sequence[tuple[float, float]]) -> tuple[int, ...]:
    """For each (start, end), in order, the lowest row (0, 1...) in which it overlaps no span
    placed before it: labels spanning those extents, drawn in those rows, never overlap."""
    placed: list[list[tuple[float, float]]] = []
    rows: list[int] = []
    for start, end in spans:
        row = next(
            (i for i, taken in enumerate(placed) if all(end <= a or b <= start for a, b in taken)),
            len(placed),
        )
        if row == len(placed):
            placed.append([])
        placed[row].append((start, end))
        rows.append(row)
    return tuple(rows)


def label_width_pt(text: str, font_pt: float) -> float:
    """A label's estimated width, with a gap after it, in points (no renderer needed)."""
    return (len(text) * _CHAR_WIDTH_EM + _LABEL_GAP_EM) * font_pt


@dataclass(frozen=True, slots=True)
class Label:
    """Where a label goes: ``x_s`` and its alignment there ("left", or "right" for one that
    would run past the end of the axis), and its row."""

    x_s: float
    align: str
    row: int


def place_labels(
    texts: Sequence[tuple[float, str]], font_pt: float, seconds_per_pt: float, span_s: float
) -> list[Label]:
    """Labels starting at their time (ending at the axis' end when they would pass it), in
    rows where none overlaps another; widths estimated from the text."""
    extents: list[tuple[float, float]] = []
    for at_s, text in texts:
        width_s = label_width_pt(text, font_pt) * seconds_per_pt
        start_s = min(at_s, span_s - width_s)
        extents.append((start_s, start_s + width_s))
    return [
        Label(at_s, "left", row) if at_s == start_s else Label(span_s, "right", row)
        for (at_s, _), (start_s, _), row in zip(texts, extents, stack_rows(extents), strict=True)
    ]


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
    span_s = max(timeline.duration_s, 1.0)
    axes_width_in = _FIGURE_WIDTH_IN - _MARGINS_IN["left"] - _MARGINS_IN["right"]
    seconds_per_pt = span_s / (axes_width_in * _PT_PER_IN)
    fault_labels = place_labels(
        [(f.start_s, f.label) for f in timeline.faults], _FAULT_FONT_PT, seconds_per_pt, span_s
    )
    leader_labels = place_labels(
        [(t, _leader_label(node, term)) for t, node, term in timeline.leaders],
        _LEADER_FONT_PT,
        seconds_per_pt,
        span_s,
    )
    row_count = _row_count(fault_labels) + _row_count(leader_labels)
    axes_height_in = _DATA_HEIGHT_IN + row_count * _ROW_HEIGHT_IN
    height_in = axes_height_in + _MARGINS_IN["bottom"] + _MARGINS_IN["top"]
    figure, axes = plt.subplots(figsize=(_FIGURE_WIDTH_IN, height_in))
    try:
        figure.subplots_adjust(
            left=_MARGINS_IN["left"] / _FIGURE_WIDTH_IN,
            right=1 - _MARGINS_IN["right"] / _FIGURE_WIDTH_IN,
            bottom=_MARGINS_IN["bottom"] / height_in,
            top=1 - _MARGINS_IN["top"] / height_in,
        )
        data_top = max(timeline.acked_per_s, default=1) * _DATA_HEADROOM or 1.0
        row_height = data_top * _ROW_HEIGHT_IN / _DATA_HEIGHT_IN
        axes.plot(
            [second + 0.5 for second in range(len(timeline.acked_per_s))],
            timeline.acked_per_s,
            color="#1f77b4",
            label="acknowledged sends/s",
        )
        axes.axhline(data_top, color="grey", linewidth=0.5)
        leader_top = data_top + _row_count(leader_labels) * row_height
        _draw_faults(axes, plt, timeline.faults, fault_labels, (data_top, leader_top, row_height))
        _draw_leaders(axes, timeline.leaders, leader_labels, (data_top, row_height))
        axes.set_xlim(0, span_s)
        axes.set_ylim(0, data_top + row_count * row_height)
        axes.set_xlabel("seconds since the first operation (whole seconds of sending only)")
        axes.set_ylabel("acknowledged sends per second")
        axes.set_title(title, fontsize=10, pad=24)
        axes.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=3, fontsize=8, frameon=False)
        figure.savefig(path, dpi=_DPI)
    finally:
        plt.close(figure)


def _leader_label(node_id: str, term: int) -> str:
    return f"{node_id} t{term}"


def _row_count(labels: Sequence[Label]) -> int:
    return max((label.row for label in labels), default=-1) + 1


def _draw_faults(
    axes: Any,
    plt: Any,
    faults: Sequence[FaultSpan],
    labels: Sequence[Label],
    heights: tuple[float, float, float],
) -> None:
    """Each fault's span, and its label in its row, counted down from the top (above the
    leader labels), joined to the span by a line (matplotlib objects are untyped here)."""
    data_top, leader_top, row_height = heights
    fault_top = leader_top + _row_count(labels) * row_height
    colours = plt.get_cmap("tab10")
    kinds = sorted({fault.name for fault in faults})
    for fault, label in zip(faults, labels, strict=True):
        colour = colours(1 + kinds.index(fault.name) % 9)
        axes.axvspan(fault.start_s, fault.end_s, color=colour, alpha=0.25, linewidth=0)
        y = fault_top - (label.row + 0.5) * row_height
        axes.vlines(fault.start_s, data_top, y - row_height / 2, color=colour, linewidth=0.8)
        text = f" {fault.label}" if label.align == "left" else f"{fault.label} "
        axes.text(label.x_s, y, text, fontsize=_FAULT_FONT_PT, va="center", ha=label.align)
    # A legend entry for the spans (a proxy: it draws nothing).
    axes.fill_between([], [], color="grey", alpha=0.25, label="fault: kind, nodes hit")


def _draw_leaders(
    axes: Any,
    leaders: Sequence[tuple[float, str, int]],
    labels: Sequence[Label],
    heights: tuple[float, float],
) -> None:
    """Each change of leader as a dotted line up to its bold label, in rows counted up from
    just above the data."""
    data_top, row_height = heights
    for (time_s, node_id, term), label in zip(leaders, labels, strict=True):
        y = data_top + (label.row + 0.5) * row_height
        axes.vlines(time_s, 0, y - row_height / 2, color="black", linestyle=":", linewidth=0.9)
        text = _leader_label(node_id, term)
        axes.text(
            label.x_s,
            y,
            f" {text}" if label.align == "left" else f"{text} ",
            fontsize=_LEADER_FONT_PT,
            fontweight="bold",
            va="center",
            ha=label.align,
        )
    # A legend entry for the markers (a proxy: it draws nothing).
    axes.plot([], [], color="black", linestyle=":", label="leader change: node, term (bold)")
