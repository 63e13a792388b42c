"""`raftlog bench modes`: the replication modes side by side on the same workload: Raft, a
SYNC_MASTER and an ASYNC_MASTER, each a fresh 3-node group of real processes on 127.0.0.1,
in interleaved rounds (the order alternates), at one durability (default fsync =
SYNC_FLUSH).

Figures per mode (medians over rounds):
- ``produce``: the typed ``Producer`` (what a user calls), ``send_batch_async`` with
  ``WINDOW`` batches of ``BATCH`` messages in flight, msgs/s acknowledged;
- ``produce-raw``: the raw gRPC stub, 256-message batches, 16 in flight (labelled raw);
- ``latency-p50`` / ``-p99``: the typed ``Producer.send``, one message at a time.
Every ``SendResult`` must be ``SEND_OK``: a master-slave figure never counts writes its
slaves did not confirm.

Rules this module keeps: every load loop is bounded by a Budget (count and seconds); each
group is stopped (by PID) and its data removed when its turn ends.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

import grpc

from raftlog.bench.cluster import (
    CHANNEL_OPTIONS,
    PRODUCER_STUB,
    BenchError,
    measure_latency_producer,
    measure_produce,
    running_cluster,
    topic_name,
)
from raftlog.bench.report import Budget, machine_description, run_bounded
from raftlog.client import Admin, Producer, SendResult

# mode -> (replication, master role)
MODES = {
    "raft": ("raft", ""),
    "sync-master": ("master-slave", "SYNC_MASTER"),
    "async-master": ("master-slave", "ASYNC_MASTER"),
}
BODY_BYTES = 1024
BATCH = 64
WINDOW = 16
QUEUES = 4


def _typed_produce(address: str, topic: str, budget: Budget) -> float:
    """msgs/s the typed Producer gets acknowledged with WINDOW batches in flight."""
    body = b"x" * BODY_BYTES
    slots = threading.Semaphore(WINDOW)
    acked = [0]
    problems: list[str] = []

    def answered(future: Future[list[SendResult]]) -> None:
        try:
            results = future.result()
            not_ok = {r.send_status for r in results} - {"SEND_OK"}
            if not_ok:
                problems.append(f"send status {sorted(not_ok)}")
            acked[0] += len(results)
        except Exception as error:  # a failed batch fails the turn, never hangs it
            problems.append(repr(error))
        finally:
            slots.release()

    with Producer(address, timeout_s=30) as producer:
        producer.send(topic, body)  # find the writer, untimed

        def step() -> int:
            if not slots.acquire(timeout=30):
                raise BenchError("no batch answered within 30 s")
            if problems:
                raise BenchError(problems[0])
            producer.send_batch_async(topic, [body] * BATCH).add_done_callback(answered)
            return BATCH

        start = time.perf_counter()
        run_bounded(step, budget)
        for _ in range(WINDOW):
            slots.acquire(timeout=30)
        seconds = time.perf_counter() - start
    if problems:
        raise BenchError(problems[0])
    return acked[0] / seconds


def measure_mode(mode: str, durability: str, root: str, budget: Budget) -> dict[str, float]:
    """One turn: a fresh group in ``mode``, its figures, then stopped."""
    replication, role = MODES[mode]
    with running_cluster(durability, root, replication, role or "SYNC_MASTER") as (
        cluster,
        leader,
    ):
        topic = topic_name(BODY_BYTES)
        with Admin(cluster.addresses) as admin:
            admin.create_topic(topic, QUEUES)
        figures = {"produce": _typed_produce(leader, topic, budget)}
        with grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as channel:
            raw = measure_produce(PRODUCER_STUB(channel), durability, BODY_BYTES, 256, 16, budget)
        figures["produce-raw"] = raw.messages / raw.seconds
        latency = measure_latency_producer([leader], durability, BODY_BYTES, Budget(500, 1.5))
        figures["latency-p50"] = latency.latency_p50_ms or 0.0
        figures["latency-p99"] = latency.latency_p99_ms or 0.0
    return figures


def run(
    modes: Sequence[str], durability: str, rounds: int, budget: Budget, root: str
) -> dict[str, dict[str, float]]:
    """Medians over ``rounds`` interleaved rounds, per mode and figure."""
    samples: dict[str, dict[str, list[float]]] = {mode: {} for mode in modes}
    for index in range(rounds):
        order = list(modes) if index % 2 == 0 else list(reversed(modes))
        for mode in order:
            figures = measure_mode(mode, durability, root, budget)
            print(f"  round {index} {mode}: {figures}", file=sys.stderr, flush=True)
            for name, value in figures.items():
                samples[mode].setdefault(name, []).append(value)
    return {
        mode: {name: statistics.median(values) for name, values in figures.items()}
        for mode, figures in samples.items()
    }


def table(medians: dict[str, dict[str, float]]) -> str:
    """A Markdown table, with each mode's typed produce throughput relative to Raft's."""
    raft = medians.get("raft", {}).get("produce")
    lines = [
        "| mode | produce (typed client, msgs/s) | vs raft | produce (raw stub, msgs/s) "
        "| send p50 (ms) | send p99 (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for mode, figures in medians.items():
        ratio = f"{figures['produce'] / raft:.2f}x" if raft else "-"
        lines.append(
            f"| {mode} | {figures['produce']:,.0f} | {ratio} | {figures['produce-raw']:,.0f} "
            f"| {figures['latency-p50']:.2f} | {figures['latency-p99']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftlog bench modes", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--max-seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--durability", choices=("fsync", "write"), default="fsync")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated; default all")
    parser.add_argument("--dir", default="./data/bench", help="where the groups' data goes")
    parser.add_argument("--json", metavar="PATH", help="write the medians as JSON")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown or not modes or args.rounds < 1 or args.max_seconds <= 0:
        parser.error(f"--modes takes {', '.join(MODES)}; --rounds and --max-seconds positive")
    os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="bench-modes-", dir=args.dir)
    budget = Budget(1_000_000, args.max_seconds)
    medians = run(modes, args.durability, args.rounds, budget, root)
    print(table(medians))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "machine": machine_description(),
                    "durability": args.durability,
                    "medians": medians,
                },
                handle,
                indent=2,
            )
    return 0
