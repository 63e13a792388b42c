"""The side-by-side bench's PNG chart: raftlog and NATS bars for each figure, one panel per
kind of figure (produce and consume throughput, sync latency, failover, raftlog's queue
scaling), with the raftlog/NATS ratio written over each pair.

Rules: matplotlib is imported here only (an optional ``bench`` dependency) with the
non-interactive Agg backend, so the chart is written on a machine without a display.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raftlog.bench.figures import Figure

PANELS = (
    ("Throughput (msgs/s, log scale)", ("produce", "consume"), True),
    ("Sync produce latency (ms, log scale)", ("latency-p50", "latency-p99"), True),
    ("Failover: leader killed / frozen to first ack (s)", ("failover", "failover-pause"), False),
    ("raftlog produce by queue count (msgs/s)", ("queues",), False),
)
COLOURS = {"raftlog": "#1f77b4", "nats": "#ff7f0e"}


def _label(figure: Figure) -> str:
    if figure.figure == "queues":
        count = figure.queue_count or 0
        return f"{count:,} queue{'s' if count > 1 else ''}"
    if figure.figure.startswith("failover"):
        return "frozen" if figure.figure == "failover-pause" else "killed"
    return f"{figure.figure}\n{figure.durability} {figure.body_bytes} B"


def _panel(axis: Any, title: str, figures: Sequence[Figure], log_scale: bool) -> None:
    width = 0.4
    for index, figure in enumerate(figures):
        for offset, system in ((-width / 2, "raftlog"), (width / 2, "nats")):
            value = getattr(figure, system)
            if value is not None:
                axis.bar(index + offset, value, width, color=COLOURS[system])
        if figure.ratio is not None:
            top = max(v for v in (figure.raftlog, figure.nats) if v is not None)
            axis.annotate(
                f"{figure.ratio:.2f}x", (index, top), ha="center", va="bottom", fontsize=7
            )
    axis.set_title(title, fontsize=9)
    axis.set_xticks(range(len(figures)))
    axis.set_xticklabels([_label(f) for f in figures], fontsize=6, rotation=30, ha="right")
    if log_scale:
        axis.set_yscale("log")
    axis.tick_params(axis="y", labelsize=7)


def write_chart(figures: Sequence[Figure], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    panels = [
        (title, [f for f in figures if f.figure in names], log_scale)
        for title, names, log_scale in PANELS
    ]
    panels = [panel for panel in panels if panel[1]]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4.5), squeeze=False)
    for axis, (title, chosen, log_scale) in zip(axes[0], panels, strict=True):
        _panel(axis, title, chosen, log_scale)
    fig.legend(
        handles=[Patch(color=c, label=s) for s, c in COLOURS.items()],
        loc="upper right",
        fontsize=8,
    )
    fig.suptitle("raftlog vs NATS JetStream (3 replicas, medians; ratio = raftlog/NATS)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
