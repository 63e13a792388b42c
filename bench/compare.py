"""The side-by-side benchmark: raftlog and NATS JetStream measured on the same workloads, on
the same machine, in one run (``raftlog bench compare`` or ``make bench``; by hand, never a
timed test; ``--quick`` is the few-second smoke run CI may use).

Both systems run as 3 server processes on 127.0.0.1 with 3 replicas and file storage, in
pairings of equal durability (docs/PERFORMANCE.md, "The peer: NATS JetStream"):
- "fsync": raftlog's default (ack after a majority fsynced) against NATS 2.10 with
  ``sync_interval: always`` (every write fsynced on every server);
- "write": raftlog ``--durability write`` (ack after a majority wrote) against NATS's default
  (ack from memory, background fsync).
Without nats-server 2.10, both pairings use the system's 2.9 default and the JSON and table
say that the "fsync" pairing's durability differs.

Workloads, for 100 B and 1 KiB bodies (raftlog: bench/cluster.py's raw gRPC stub with
pre-built batches, several (batch, window) settings; NATS: bench/nats_workloads.py, nats-py
``publish_async`` at several windows, clients on the stream leader):
1. ``produce``: acknowledged produce throughput; the best setting's median is the figure.
2. ``latency-p50`` / ``latency-p99``: single-message synchronous produce, one in flight.
3. ``consume``: reading back what was stored, 1,024 messages per request (raftlog: the typed
   ``Consumer`` on the leader, its fast Pull form; NATS: a pull consumer, ``fetch(1024)``).
4. ``failover`` (fsync pairing): SIGKILL the leader under load, seconds to the first ack of a
   send invoked after the kill; several runs per round, the median over all.
5. ``queues`` (raftlog only, fsync): produce throughput over 1, 1,000 and 10,000 queues.

Rules this module keeps:
- Interleaved rounds: each round starts fresh clusters of both systems, in alternating order,
  so noise from the shared machine falls on both; every figure is a median over rounds, and
  every ratio is raftlog / NATS of the medians.
- Every loop is bounded by count and time (``Budget``), every wait in time; clusters are
  always stopped (try/finally) and only processes this bench started are signalled.
- ``--json`` writes every sample with its parameters, the figures, ratios, targets, versions
  and the machine; ``--chart`` writes a PNG (bench/chart.py).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.metadata
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import grpc

from raftlog.bench import nats_workloads, queue_scaling
from raftlog.bench.cluster import (
    BODY_SIZES_BYTES,
    CHANNEL_OPTIONS,
    PRODUCER_STUB,
    BenchError,
    measure_latency_stub,
    measure_produce,
    percentile_ms,
    prepare_topics,
    queue_bounds,
    running_cluster,
    source_description,
    topic_name,
)
from raftlog.bench.nats_cluster import NatsCluster, NatsClusterError
from raftlog.bench.nats_install import NatsBinary, NatsUnavailable, best_nats, system_nats
from raftlog.bench.raftlog_failover import measure_failover
from raftlog.bench.report import Budget, write_json_report
from raftlog.client.admin import Admin
from raftlog.client.consumer import Consumer
from raftlog.client.errors import RaftlogError
from raftlog.testing.local_cluster import ClusterError

SYSTEMS = ("raftlog", "nats")
DURABILITY_MODES = ("fsync", "write")
# (batch, window): raftlog's best-throughput region in bench/cluster.py's sweep.
RAFTLOG_PRODUCE_SETTINGS = ((64, 16), (256, 4), (256, 16), (256, 64))
# Outstanding acks; NATS is flat from 64 up (docs/PERFORMANCE.md, "The peer").
NATS_WINDOWS = (64, 256, 1024)
# Messages per fetch/poll, both systems (raftlog's server caps a pull at 1,024).
FETCH_BATCH = 1024
CONSUME_POLL_S = 1.0
FAILOVER_BODY_BYTES = 100
QUEUE_COUNTS = (1, 1_000, 10_000)
QUICK_QUEUE_COUNTS = (1, 10, 100)
QUEUE_BODY_BYTES = 100
QUEUE_BATCH = 256
QUEUE_WINDOW = 16
QUEUE_WARM_UP_S = 120.0
TURN_ATTEMPTS = 3
RETRIED_ERRORS = (
    BenchError,
    ClusterError,
    RaftlogError,
    NatsClusterError,
    nats_workloads.NatsBenchError,
)
# Higher is better for these figures; lower for the rest (latency, failover seconds).
HIGHER_IS_BETTER = {"produce", "consume", "queues"}


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    produce: Budget
    latency: Budget
    consume: Budget
    warm_up: Budget
    failover_runs: int  # per round, per system
    queue_counts: tuple[int, ...]
    queues: Budget
    # The queue counts run on one cluster, so more rounds cost little and steady the medians.
    queue_rounds: int


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


class Recorder:
    """Collects samples, printing one progress line per sample on stderr. A turn's samples are
    pending until ``keep``; ``drop`` discards a failed turn's, so a retried turn never counts
    twice."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.warnings: list[str] = []
        self._pending: list[Sample] = []

    def add(self, sample: Sample) -> None:
        self._pending.append(sample)
        settings = " ".join(f"{k}={v}" for k, v in sample.setting.items())
        print(
            f"  r{sample.round} {sample.system} {sample.durability} {sample.figure} "
            f"{sample.body_bytes} B {settings}: {sample.value:,.2f} {sample.unit}",
            file=sys.stderr,
            flush=True,
        )

    def keep(self) -> None:
        self.samples += self._pending
        self._pending = []

    def drop(self) -> None:
        self._pending = []

    def attempt(self, what: str, measure: Callable[[], None]) -> None:
        """Run one turn on fresh servers, retried (its samples dropped) when it fails: on a
        shared machine a starved node can lose its leadership mid-measurement."""
        for attempt in range(1, TURN_ATTEMPTS + 1):
            try:
                measure()
            except RETRIED_ERRORS as error:
                self.drop()
                if attempt == TURN_ATTEMPTS:
                    raise
                warning = f"{what}: attempt {attempt} failed ({error}); retried on fresh servers"
                print(f"warning: {warning}", file=sys.stderr, flush=True)
                self.warnings.append(warning)
            else:
                self.keep()
                return


def nats_sync_label(binary: NatsBinary, durability: str) -> str:
    if durability == "fsync" and binary.has_sync_interval:
        return f"nats-server {binary.version}, sync_interval: always"
    return f"nats-server {binary.version}, default sync"


@dataclass(frozen=True, slots=True)
class Round:
    """One system's turn in one interleaved round of one pairing."""

    durability: str
    plan: Plan
    root: str
    index: int
    recorder: Recorder
    failover: bool  # measure failover in this turn

    def add(
        self,
        system: str,
        figure: str,
        body: int,
        setting: dict[str, object],
        value: float,
        unit: str,
    ) -> None:
        self.recorder.add(
            Sample(system, self.durability, figure, body, setting, self.index, value, unit)
        )


def _raftlog_consume(address: str, topic: str, stored: int, budget: Budget) -> tuple[int, float]:
    """The typed ``Consumer`` reading ``topic`` from its start on the leader (its fast Pull
    form: stored records' bytes, verified and decoded in the client, as nats-py decodes each
    message) until ``stored`` messages or the budget; (messages read, seconds)."""
    limit = min(stored, budget.max_count)
    read = 0
    consumer = Consumer(
        address, group="bench-compare", topic=topic, from_beginning=True, max_messages=FETCH_BATCH
    )
    try:
        start = time.perf_counter()
        deadline = start + budget.max_seconds
        while read < limit and time.perf_counter() < deadline:
            count = len(consumer.poll(timeout_s=CONSUME_POLL_S))
            if count == 0:
                raise BenchError(f"Consumer.poll on {topic} returned nothing after {read}")
            read += count
        return read, time.perf_counter() - start
    finally:
        consumer.close()


def _raftlog_round(turn: Round) -> None:
    plan = turn.plan
    with (
        running_cluster(turn.durability, turn.root) as (cluster, leader),
        Admin(cluster.addresses) as admin,
        grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as channel,
    ):
        stub = PRODUCER_STUB(channel)
        prepare_topics(admin, stub, plan.warm_up)
        for body in BODY_SIZES_BYTES:
            for batch, window in RAFTLOG_PRODUCE_SETTINGS:
                row = measure_produce(stub, turn.durability, body, batch, window, plan.produce)
                setting: dict[str, object] = {"batch": batch, "window": window}
                turn.add("raftlog", "produce", body, setting, row.msgs_per_s, "msgs/s")
            row = measure_latency_stub(stub, turn.durability, body, plan.latency)
            setting = {"samples": row.messages}
            turn.add("raftlog", "latency-p50", body, setting, row.latency_p50_ms or 0.0, "ms")
            turn.add("raftlog", "latency-p99", body, setting, row.latency_p99_ms or 0.0, "ms")
        for body in BODY_SIZES_BYTES:
            stored = sum(
                end - first for first, end in queue_bounds(admin, topic_name(body), leader).values()
            )
            messages, seconds = _raftlog_consume(leader, topic_name(body), stored, plan.consume)
            setting = {"client": "Consumer", "max_messages": FETCH_BATCH, "messages": messages}
            turn.add("raftlog", "consume", body, setting, messages / seconds, "msgs/s")
        for _ in range(plan.failover_runs if turn.failover else 0):
            seconds = measure_failover(cluster, FAILOVER_BODY_BYTES)
            turn.add("raftlog", "failover", FAILOVER_BODY_BYTES, {}, seconds, "s")


async def _nats_measure(cluster: NatsCluster, turn: Round) -> None:
    plan = turn.plan
    await nats_workloads.create_streams(cluster.urls, BODY_SIZES_BYTES)
    leaders: dict[int, str] = {}
    for body in BODY_SIZES_BYTES:
        leader = await nats_workloads.stream_leader(
            cluster, nats_workloads.stream_name(body), nats_workloads.STREAM_READY_TIMEOUT_S
        )
        leaders[body] = url = cluster.url(leader)
        if body == BODY_SIZES_BYTES[0]:
            await nats_workloads.produce_window(url, body, NATS_WINDOWS[0], plan.warm_up)
        for window in NATS_WINDOWS:
            messages, seconds = await nats_workloads.produce_window(url, body, window, plan.produce)
            turn.add("nats", "produce", body, {"window": window}, messages / seconds, "msgs/s")
        samples_s, _ = await nats_workloads.publish_latencies(url, body, plan.latency)
        setting: dict[str, object] = {"samples": len(samples_s)}
        turn.add("nats", "latency-p50", body, setting, percentile_ms(samples_s, 0.50), "ms")
        turn.add("nats", "latency-p99", body, setting, percentile_ms(samples_s, 0.99), "ms")
    for body in BODY_SIZES_BYTES:
        total = await nats_workloads.stored_messages(cluster, body)
        messages, seconds = await nats_workloads.consume(
            leaders[body], body, total, FETCH_BATCH, plan.consume
        )
        setting = {"fetch": FETCH_BATCH, "messages": messages}
        turn.add("nats", "consume", body, setting, messages / seconds, "msgs/s")
    for _ in range(plan.failover_runs if turn.failover else 0):
        seconds = await nats_workloads.failover(cluster, FAILOVER_BODY_BYTES)
        turn.add("nats", "failover", FAILOVER_BODY_BYTES, {}, seconds, "s")


def _nats_round(binary: NatsBinary, turn: Round) -> None:
    base_dir = tempfile.mkdtemp(prefix=f"nats-{turn.durability}-", dir=turn.root)
    sync_always = turn.durability == "fsync" and binary.has_sync_interval
    cluster = NatsCluster(binary, base_dir, sync_always=sync_always)
    try:
        cluster.start()
        asyncio.run(_nats_measure(cluster, turn))
    finally:
        cluster.stop()
        shutil.rmtree(base_dir, ignore_errors=True)


def _queue_round(plan: Plan, root: str, recorder: Recorder) -> None:
    """The queue-scaling figure (raftlog only, fsync), its rounds interleaved on one cluster."""

    def record(round_index: int, queue_count: int, msgs_per_s: float) -> None:
        setting: dict[str, object] = {
            "queue_count": queue_count,
            "topics": len(queue_scaling.topics_for(queue_count)),
            "batch": QUEUE_BATCH,
            "window": QUEUE_WINDOW,
        }
        recorder.add(
            Sample(
                "raftlog",
                "fsync",
                "queues",
                QUEUE_BODY_BYTES,
                setting,
                round_index,
                msgs_per_s,
                "msgs/s",
            )
        )

    with (
        running_cluster("fsync", root) as (cluster, leader),
        Admin(cluster.addresses) as admin,
        grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as channel,
    ):
        stub = PRODUCER_STUB(channel)
        for queue_count in plan.queue_counts:
            queue_scaling.create_topics(admin, queue_count)
            queue_scaling.warm_up(stub, queue_count, QUEUE_WARM_UP_S)
        queue_scaling.measure(
            stub,
            plan.queue_counts,
            QUEUE_BODY_BYTES,
            QUEUE_BATCH,
            QUEUE_WINDOW,
            plan.queues,
            plan.queue_rounds,
            record,
        )


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
            setattr(figure, system, value)
            setattr(figure, f"{system}_setting", setting)
            setattr(figure, f"{system}_runs", runs)
        if figure.raftlog is not None and figure.nats:
            figure.ratio = figure.raftlog / figure.nats
        figures.append(figure)
    return figures


def _find(
    figures: Sequence[Figure], name: str, body: int | None = None, queues: int | None = None
) -> Figure | None:
    return next(
        (
            f
            for f in figures
            if f.figure == name
            and f.durability == "fsync"
            and (body is None or f.body_bytes == body)
            and f.queue_count == queues
        ),
        None,
    )


def evaluate_targets(figures: Sequence[Figure]) -> list[dict[str, object]]:
    """The issue's targets, on the fsync pairing (raftlog's default durability)."""
    results: list[dict[str, object]] = []

    def check(target: str, measured: float, met: bool, shown: str) -> None:
        results.append({"target": target, "measured": measured, "shown": shown, "met": met})

    for body in BODY_SIZES_BYTES:
        produce = _find(figures, "produce", body)
        if produce is not None and produce.ratio is not None:
            ratio = produce.ratio
            check(f"produce {body} B >= 2x NATS", ratio, ratio >= 2.0, f"{ratio:.2f}x")
        for name, limit_ms in (("latency-p50", 1.0), ("latency-p99", 5.0)):
            latency = _find(figures, name, body)
            if latency is not None and latency.raftlog is not None:
                value = latency.raftlog
                target = f"sync {name[-3:]} {body} B <= {limit_ms:g} ms"
                check(target, value, value <= limit_ms, f"{value:.2f} ms")
    consume = _find(figures, "consume", 1024)
    if consume is not None and consume.raftlog is not None:
        value = consume.raftlog
        check("consume 1 KiB >= 200k msgs/s", value, value >= 200_000, f"{value:,.0f} msgs/s")
    failover = _find(figures, "failover")
    if failover is not None and failover.raftlog is not None:
        value = failover.raftlog
        check("failover median <= 1 s", value, value <= 1.0, f"{value:.2f} s")
    scaling = sorted(
        (f for f in figures if f.figure == "queues" and f.raftlog is not None),
        key=lambda f: f.queue_count or 0,
    )
    if len(scaling) >= 2 and scaling[0].raftlog and scaling[-1].raftlog is not None:
        ratio = scaling[-1].raftlog / scaling[0].raftlog
        target = f"{scaling[-1].queue_count:,} queues >= 90% of {scaling[0].queue_count:,} queue"
        check(target, ratio, ratio >= 0.9, f"{ratio:.1%}")
    return results


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if unit == "msgs/s" else f"{value:.2f}"


def _setting(setting: dict[str, object]) -> str:
    return " ".join(f"{k} {v}" for k, v in setting.items()) or "-"


def render_table(figures: Sequence[Figure], nats_labels: dict[str, str]) -> str:
    lines = [
        "| figure | durability: raftlog / NATS | body B | unit | raftlog | NATS "
        "| raftlog/NATS | raftlog setting | NATS setting |",
        "|---|---|---|---|---|---|---|---|---|",
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
        )
    return "\n".join(lines)


def render_targets(targets: Sequence[dict[str, object]]) -> str:
    lines = ["| target (fsync pairing) | measured | status |", "|---|---|---|"]
    for t in targets:
        lines.append(f"| {t['target']} | {t['shown']} | {'met' if t['met'] else '**missed**'} |")
    return "\n".join(lines)


def versions(binary: NatsBinary | None) -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    for package in ("grpcio", "nats-py", "protobuf"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    found["nats-server"] = binary.version if binary is not None else "not used"
    return found


def run(
    plan: Plan,
    systems: Sequence[str],
    durabilities: Sequence[str],
    binary: NatsBinary | None,
    root: str,
    recorder: Recorder,
) -> None:
    """Interleaved rounds of every (pairing, system), then raftlog's queue scaling."""
    for round_index in range(plan.rounds):
        order = list(systems) if round_index % 2 == 0 else list(reversed(systems))
        for durability in durabilities:
            # Failover does not depend on durability: measured once, in the first pairing.
            failover = durability == durabilities[0]
            turn = Round(durability, plan, root, round_index, recorder, failover)
            for system in order:
                what = f"round {round_index} {system} / {durability}"
                print(f"[{what}]", file=sys.stderr)
                if system == "raftlog":
                    recorder.attempt(what, functools.partial(_raftlog_round, turn))
                else:
                    assert binary is not None
                    recorder.attempt(what, functools.partial(_nats_round, binary, turn))
    if "raftlog" in systems and plan.queue_counts:
        print("[queues] raftlog / fsync", file=sys.stderr)
        recorder.attempt("queues", functools.partial(_queue_round, plan, root, recorder))


def _plan(args: argparse.Namespace) -> Plan:
    if args.quick:
        return Plan(
            rounds=1,
            produce=Budget(2_000, 0.3),
            latency=Budget(30, 0.3),
            consume=Budget(5_000, 0.5),
            warm_up=Budget(200, 0.3),
            failover_runs=1,
            queue_counts=QUICK_QUEUE_COUNTS,
            queues=Budget(2_000, 0.3),
            queue_rounds=1,
        )
    return Plan(
        rounds=args.rounds,
        produce=Budget(500_000, args.max_seconds),
        latency=Budget(2_000, args.max_seconds),
        consume=Budget(100_000, 2 * args.max_seconds),
        warm_up=Budget(5_000, 1.0),
        failover_runs=args.failover_runs,
        queue_counts=QUEUE_COUNTS,
        queues=Budget(500_000, args.max_seconds),
        queue_rounds=2 * args.rounds,
    )


def _nats_binary(choice: str, cache_dir: str, warnings: list[str]) -> NatsBinary:
    if choice == "system":
        return system_nats()
    if choice == "2.10":
        from raftlog.bench.nats_install import trixie_nats

        return trixie_nats(cache_dir)
    return best_nats(cache_dir, warnings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftlog bench compare", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="write every figure as JSON")
    parser.add_argument("--chart", metavar="PATH", help="write a PNG chart (needs matplotlib)")
    parser.add_argument("--dir", default="./data/bench", help="where clusters' data goes")
    parser.add_argument("--quick", action="store_true", help="a few-second smoke run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--max-seconds", type=float, default=1.5, help="per measurement")
    parser.add_argument("--failover-runs", type=int, default=2, help="per round and system")
    parser.add_argument(
        "--systems", choices=("both", *SYSTEMS), default="both", help="default both"
    )
    parser.add_argument(
        "--durability",
        choices=(*DURABILITY_MODES, "both"),
        help="pairings (default both; fsync with --quick)",
    )
    parser.add_argument(
        "--nats",
        choices=("auto", "2.10", "system"),
        default="auto",
        help="nats-server: 2.10 from Debian 13 (fetched, not installed), the system's "
        "package (installed with apt-get if missing), or auto (2.10 if it can be had)",
    )
    parser.add_argument(
        "--nats-cache-dir",
        default="./data/bench/nats-2.10",
        help="where nats-server 2.10 is unpacked (reused across runs)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.max_seconds <= 0 or args.failover_runs < 0:
        parser.error("--rounds and --max-seconds must be positive, --failover-runs >= 0")
    plan = _plan(args)
    systems = SYSTEMS if args.systems == "both" else (args.systems,)
    durability = args.durability or ("fsync" if args.quick else "both")
    durabilities = DURABILITY_MODES if durability == "both" else (durability,)
    warnings: list[str] = []
    recorder = Recorder()
    os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="bench-compare-", dir=args.dir)
    source = source_description()
    binary: NatsBinary | None = None
    try:
        if "nats" in systems:
            binary = _nats_binary(args.nats, args.nats_cache_dir, warnings)
            if "fsync" in durabilities and not binary.has_sync_interval:
                warnings.append(
                    f"nats-server {binary.version} has no sync_interval: always, so the fsync "
                    "pairing compares raftlog's fsync-before-ack with NATS acking from memory"
                )
        run(plan, systems, durabilities, binary, root, recorder)
    except (NatsUnavailable, *RETRIED_ERRORS) as error:
        print(f"raftlog bench compare: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = summarise(recorder.samples)
    targets = evaluate_targets(figures)
    labels = {d: nats_sync_label(binary, d) for d in durabilities} if binary else {}
    warnings += recorder.warnings
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(render_table(figures, labels))
    print()
    print(render_targets(targets))
    if args.chart:
        from raftlog.bench.chart import write_chart

        write_chart(figures, args.chart)
    if args.json:
        write_json_report(
            args.json,
            "compare",
            plan.produce,
            plan.rounds,
            recorder.samples,
            plan=asdict(plan),
            versions=versions(binary),
            nats_pairing=labels,
            figures=[asdict(f) for f in figures],
            targets=targets,
            warnings=warnings,
            source=source,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
