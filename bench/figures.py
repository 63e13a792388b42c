"""The side-by-side bench's arithmetic (bench/compare.py measures, this module counts):
samples, the figures they make (medians over rounds, the best setting per system,
raftlog/NATS ratios), the targets' verdicts and the Markdown table.

Rules this module keeps: pure (no servers, no clock, no I/O); a figure's ratio divides the
two systems' medians; "best" is the highest median for throughput figures and the lowest for
latency and failover seconds.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from raftlog.bench.cluster import BODY_SIZES_BYTES

# Higher is better for these figures; lower for the rest (latency, failover seconds).
HIGHER_IS_BETTER = {"produce", "produce-raw", "consume", "queues"}
# A raftlog sample in another replication mode than Raft is of system "raftlog:<mode>".
MODE_PREFIX = "raftlog:"


@dataclass(slots=True)
class Sample:
    """One measured number, with everything that produced it."""

    system: str
    durability: str  # the pairing: raftlog's durability mode
    figure: str
    body_bytes: int
    setting: dict[str, object]
    round: int
    value: float
    unit: str


@dataclass(slots=True)
class Figure:
    """Medians over rounds of one figure for both systems, and raftlog / NATS."""

    figure: str
    durability: str
    body_bytes: int
    unit: str
    queue_count: int | None = None
    raftlog: float | None = None
    nats: float | None = None
    raftlog_setting: dict[str, object] = field(default_factory=dict)
    nats_setting: dict[str, object] = field(default_factory=dict)
    raftlog_runs: int = 0
    nats_runs: int = 0
    ratio: float | None = None
    # raftlog's median in each master-slave mode measured ("sync-master", "async-master").
    modes: dict[str, float] = field(default_factory=dict)


def _figure_key(sample: Sample) -> tuple[str, str, int, int | None]:
    queue_count = sample.setting.get("queue_count") if sample.figure == "queues" else None
    return (
        sample.figure,
        sample.durability,
        sample.body_bytes,
        None if queue_count is None else int(str(queue_count)),
    )


def _median_of_best(samples: Sequence[Sample]) -> tuple[float, dict[str, object], int]:
    """Median per setting (ignoring per-run counts); the best setting's median."""
    by_setting: dict[tuple[tuple[str, object], ...], list[Sample]] = {}
    for sample in samples:
        key = tuple(
            (k, v) for k, v in sorted(sample.setting.items()) if k not in {"messages", "samples"}
        )
        by_setting.setdefault(key, []).append(sample)
    higher = samples[0].figure in HIGHER_IS_BETTER
    medians = {key: statistics.median(s.value for s in group) for key, group in by_setting.items()}
    best = (max if higher else min)(medians, key=lambda key: medians[key])
    return medians[best], dict(best), len(by_setting[best])


def summarise(samples: Sequence[Sample]) -> list[Figure]:
    """One Figure per (figure, durability, body, queue count), in first-seen order."""
    groups: dict[tuple[str, str, int, int | None], dict[str, list[Sample]]] = {}
    for sample in samples:
        groups.setdefault(_figure_key(sample), {}).setdefault(sample.system, []).append(sample)
    figures: list[Figure] = []
    for (name, durability, body, queue_count), by_system in groups.items():
        unit = next(iter(by_system.values()))[0].unit
        figure = Figure(name, durability, body, unit, queue_count)
        for system, system_samples in by_system.items():
            value, setting, runs = _median_of_best(system_samples)
            if system.startswith(MODE_PREFIX):
                figure.modes[system.removeprefix(MODE_PREFIX)] = value
                continue
            setattr(figure, system, value)
            setattr(figure, f"{system}_setting", setting)
            setattr(figure, f"{system}_runs", runs)
        if figure.raftlog is not None and figure.nats:
            figure.ratio = figure.raftlog / figure.nats
        figures.append(figure)
    return figures


def _find(
    figures: Sequence[Figure],
    name: str,
    body: int | None = None,
    queues: int | None = None,
    durability: str = "fsync",
) -> Figure | None:
    return next(
        (
            f
            for f in figures
            if f.figure == name
            and f.durability == durability
            and (body is None or f.body_bytes == body)
            and f.queue_count == queues
        ),
        None,
    )


# Issue 17's targets: the typed client (the user's path) against nats-py, per pairing.
PRODUCE_VS_NATS = {"fsync": 10.0, "write": 1.0}
LATENCY_P50_MS = {"fsync": 1.0, "write": 0.7}
LATENCY_P99_MS = 3.0
TYPED_VS_RAW = 0.9
CONSUME_MSGS_PER_S = 200_000
FAILOVER_KILL_S = 0.1
FAILOVER_PAUSE_S = 1.5

Check = Callable[[str, float, bool, str], None]


def evaluate_targets(figures: Sequence[Figure]) -> list[dict[str, object]]:
    """The targets of issue 17 (user's path, both pairings) and the master-slave modes'."""
    results: list[dict[str, object]] = []

    def check(target: str, measured: float, met: bool, shown: str) -> None:
        results.append({"target": target, "measured": measured, "shown": shown, "met": met})

    for durability in PRODUCE_VS_NATS:
        for body in BODY_SIZES_BYTES:
            _check_produce(figures, durability, body, check)
            _check_latency(figures, durability, body, check)
    consume = _find(figures, "consume", 1024)
    if consume is not None and consume.raftlog is not None:
        value = consume.raftlog
        check("consume 1 KiB >= 200k msgs/s", value, value >= CONSUME_MSGS_PER_S, f"{value:,.0f}")
    for name, limit_s, what in (
        ("failover", FAILOVER_KILL_S, "killed"),
        ("failover-pause", FAILOVER_PAUSE_S, "frozen"),
    ):
        failover = _find(figures, name)
        if failover is not None and failover.raftlog is not None:
            value = failover.raftlog
            check(
                f"leader {what}: first ack <= {limit_s:g} s",
                value,
                value <= limit_s,
                f"{value:.2f} s",
            )
    for body in BODY_SIZES_BYTES:
        _check_modes(_find(figures, "produce", body), body, check)
    _check_scaling(figures, check)
    return results


def _check_produce(figures: Sequence[Figure], durability: str, body: int, check: Check) -> None:
    typed = _find(figures, "produce", body, durability=durability)
    if typed is None or typed.raftlog is None:
        return
    if typed.ratio is not None:
        factor = PRODUCE_VS_NATS[durability]
        target = f"typed produce {body} B >= {factor:g}x NATS ({durability})"
        check(target, typed.ratio, typed.ratio >= factor, f"{typed.ratio:.2f}x")
    raw = _find(figures, "produce-raw", body, durability=durability)
    if raw is not None and raw.raftlog:
        share = typed.raftlog / raw.raftlog
        target = f"typed produce {body} B >= {TYPED_VS_RAW:.0%} of raw ({durability})"
        check(target, share, share >= TYPED_VS_RAW, f"{share:.0%}")


def _check_latency(figures: Sequence[Figure], durability: str, body: int, check: Check) -> None:
    for name, limit_ms in (
        ("latency-p50", LATENCY_P50_MS[durability]),
        ("latency-p99", LATENCY_P99_MS),
    ):
        latency = _find(figures, name, body, durability=durability)
        if latency is not None and latency.raftlog is not None:
            value = latency.raftlog
            target = f"send {name[-3:]} {body} B <= {limit_ms:g} ms ({durability})"
            check(target, value, value <= limit_ms, f"{value:.2f} ms")


def _check_scaling(figures: Sequence[Figure], check: Check) -> None:
    scaling = sorted(
        (f for f in figures if f.figure == "queues" and f.raftlog is not None),
        key=lambda f: f.queue_count or 0,
    )
    if len(scaling) >= 2 and scaling[0].raftlog and scaling[-1].raftlog is not None:
        ratio = scaling[-1].raftlog / scaling[0].raftlog
        target = f"{scaling[-1].queue_count:,} queues >= 90% of {scaling[0].queue_count:,} queue"
        check(target, ratio, ratio >= 0.9, f"{ratio:.1%}")


# A master-slave mode's produce throughput target, as a multiple of Raft mode's.
MODE_PRODUCE_TARGETS = {"sync-master": 1.0, "async-master": 1.5}


def _check_modes(produce: Figure | None, body: int, check: Check) -> None:
    if produce is None or not produce.raftlog:
        return
    for mode, value in produce.modes.items():
        factor = MODE_PRODUCE_TARGETS.get(mode)
        if factor is not None:
            ratio = value / produce.raftlog
            target = f"{mode} produce {body} B >= {factor:g}x raft"
            check(target, ratio, ratio >= factor, f"{ratio:.2f}x")


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if unit == "msgs/s" else f"{value:.2f}"


def _setting(setting: dict[str, object]) -> str:
    return " ".join(f"{k} {v}" for k, v in setting.items()) or "-"


def render_table(figures: Sequence[Figure], nats_labels: dict[str, str]) -> str:
    """The figures as Markdown; a column per master-slave mode measured ("raftlog" is Raft
    mode)."""
    modes = list(dict.fromkeys(mode for f in figures for mode in f.modes))
    lines = [
        "| figure | durability: raftlog / NATS | body B | unit | raftlog | NATS "
        "| raftlog/NATS | raftlog setting | NATS setting |"
        + "".join(f" raftlog {mode} |" for mode in modes),
        "|---|---|---|---|---|---|---|---|---|" + "---|" * len(modes),
    ]
    for f in figures:
        name = f.figure
        if f.queue_count is not None:
            name = f"produce, {f.queue_count:,} queue{'s' if f.queue_count > 1 else ''}"
        nats_label = "-" if f.figure == "queues" else nats_labels.get(f.durability, "-")
        pairing = f"{f.durability} / {nats_label}"
        ratio = "-" if f.ratio is None else f"{f.ratio:.2f}"
        lines.append(
            f"| {name} | {pairing} | {f.body_bytes} | {f.unit} | {_number(f.raftlog, f.unit)} "
            f"| {_number(f.nats, f.unit)} | {ratio} | {_setting(f.raftlog_setting)} "
            f"| {_setting(f.nats_setting)} |"
            + "".join(f" {_number(f.modes.get(mode), f.unit)} |" for mode in modes)
        )
    return "\n".join(lines)


def render_targets(targets: Sequence[dict[str, object]]) -> str:
    lines = ["| target | measured | status |", "|---|---|---|"]
    for t in targets:
        lines.append(f"| {t['target']} | {t['shown']} | {'met' if t['met'] else '**missed**'} |")
    return "\n".join(lines)
