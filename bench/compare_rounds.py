"""The measuring half of the side-by-side bench (bench/compare.py runs it): the plan of one
run, each system's turn of one interleaved round on fresh servers, raftlog's queue scaling,
and the recorder that keeps a turn's samples only when the turn finished.

Rules this module keeps: every load loop is bounded by a Budget (count and seconds); servers
bind 127.0.0.1 and are stopped by the turn that started them; a failed turn's samples are
dropped and the turn retried on fresh servers, at most ``TURN_ATTEMPTS`` times.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from raftlog.bench import nats_workloads, queue_scaling
from raftlog.bench.cluster import (
    BODY_SIZES_BYTES,
    CHANNEL_OPTIONS,
    PRODUCER_STUB,
    BenchError,
    measure_latency_producer,
    measure_latency_stub,
    measure_produce,
    percentile_ms,
    prepare_topics,
    queue_bounds,
    running_cluster,
    topic_name,
)
from raftlog.bench.figures import MODE_PREFIX, Sample
from raftlog.bench.modes import MODES
from raftlog.bench.nats_cluster import NatsCluster, NatsClusterError
from raftlog.bench.nats_install import NatsBinary
from raftlog.bench.raftlog_failover import measure_failover
from raftlog.bench.report import Budget
from raftlog.bench.typed_client import typed_produce
from raftlog.client.admin import Admin
from raftlog.client.consumer import Consumer
from raftlog.client.errors import RaftlogError
from raftlog.testing.local_cluster import ClusterError

RAFTLOG_PRODUCE_SETTINGS = ((64, 16), (256, 4), (256, 16), (256, 64))
# Outstanding acks; NATS is flat from 64 up (docs/PERFORMANCE.md, "The peer").
NATS_WINDOWS = (64, 256, 1024)
# Messages per fetch/poll, both systems (raftlog's server caps a pull at 1,024).
FETCH_BATCH = 1024
CONSUME_POLL_S = 1.0
FAILOVER_BODY_BYTES = 100
# The leader's fault -> the figure it gives (a frozen leader must cost about a dead one).
FAILOVER_FIGURES = {"kill": "failover", "pause": "failover-pause"}
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
    consumer = Consumer(address, group="bench-compare", topic=topic, from_beginning=True)
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


def raftlog_system(mode: str) -> str:
    """The system name raftlog's samples in ``mode`` (a key of bench/modes.py's MODES) carry."""
    return "raftlog" if mode == "raft" else f"{MODE_PREFIX}{mode}"


def raftlog_round(turn: Round, mode: str = "raft") -> None:
    """raftlog's turn in one replication ``mode``: produce, latency, consume, and failover
    (Raft mode only: a master-slave group's failover comes with its controller, measured by
    the chaos soak)."""
    plan = turn.plan
    system = raftlog_system(mode)
    replication, role = MODES[mode]
    with (
        running_cluster(turn.durability, turn.root, replication, role or "SYNC_MASTER") as (
            cluster,
            leader,
        ),
        Admin(cluster.addresses) as admin,
        grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as channel,
    ):
        stub = PRODUCER_STUB(channel)
        prepare_topics(admin, stub, plan.warm_up)
        for body in BODY_SIZES_BYTES:
            _raftlog_produce(turn, system, cluster.addresses, body)
            _raftlog_raw_path(turn, system, admin.cluster_status().leader_address or leader, body)
        for body in BODY_SIZES_BYTES:
            stored = sum(
                end - first for first, end in queue_bounds(admin, topic_name(body), leader).values()
            )
            messages, seconds = _raftlog_consume(leader, topic_name(body), stored, plan.consume)
            setting = {"client": "Consumer", "messages": messages}
            turn.add(system, "consume", body, setting, messages / seconds, "msgs/s")
        for _ in range(plan.failover_runs if turn.failover and mode == "raft" else 0):
            for fault, figure in FAILOVER_FIGURES.items():
                seconds = measure_failover(cluster, FAILOVER_BODY_BYTES, fault)
                turn.add("raftlog", figure, FAILOVER_BODY_BYTES, {}, seconds, "s")


def _raftlog_produce(turn: Round, system: str, addresses: list[str], body: int) -> None:
    """The user's path: ``Producer.send_async`` (defaults) at NATS's windows, and
    ``Producer.send`` latency."""
    for window in NATS_WINDOWS:
        messages, seconds = typed_produce(addresses, body, window, turn.plan.produce)
        setting: dict[str, object] = {"client": "Producer.send_async", "window": window}
        turn.add(system, "produce", body, setting, messages / seconds, "msgs/s")
    row = measure_latency_producer(addresses, turn.durability, body, turn.plan.latency)
    setting = {"client": "Producer.send", "samples": row.messages}
    turn.add(system, "latency-p50", body, setting, row.latency_p50_ms or 0.0, "ms")
    turn.add(system, "latency-p99", body, setting, row.latency_p99_ms or 0.0, "ms")


def _raftlog_raw_path(turn: Round, system: str, leader: str, body: int) -> None:
    """The raw path, labelled so: the gRPC stub with pre-built, non-idempotent batches, to
    the leader as of now (a starved leader may have lost its place to another member since
    the cluster started: the stub does not follow redirects, the typed client does)."""
    with grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as channel:
        _raw_path_on(turn, system, PRODUCER_STUB(channel), body)


def _raw_path_on(turn: Round, system: str, stub: Any, body: int) -> None:
    for batch, window in RAFTLOG_PRODUCE_SETTINGS:
        row = measure_produce(stub, turn.durability, body, batch, window, turn.plan.produce)
        setting: dict[str, object] = {"batch": batch, "window": window}
        turn.add(system, "produce-raw", body, setting, row.msgs_per_s, "msgs/s")
    row = measure_latency_stub(stub, turn.durability, body, turn.plan.latency)
    setting = {"samples": row.messages}
    turn.add(system, "latency-raw-p50", body, setting, row.latency_p50_ms or 0.0, "ms")
    turn.add(system, "latency-raw-p99", body, setting, row.latency_p99_ms or 0.0, "ms")


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


def nats_round(binary: NatsBinary, turn: Round) -> None:
    base_dir = tempfile.mkdtemp(prefix=f"nats-{turn.durability}-", dir=turn.root)
    sync_always = turn.durability == "fsync" and binary.has_sync_interval
    cluster = NatsCluster(binary, base_dir, sync_always=sync_always)
    try:
        cluster.start()
        asyncio.run(_nats_measure(cluster, turn))
    finally:
        cluster.stop()
        shutil.rmtree(base_dir, ignore_errors=True)


def queue_round(plan: Plan, root: str, recorder: Recorder) -> None:
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
