"""The latency and failover benchmark: single-message produce latency, batch-256 throughput and
leader failover time on a real local 3-node cluster, with node flags under test.

Run by hand (it is not a timed test): ``python -m raftlog.bench.latency [--json PATH]
[--node-arg=--tick-ms=50 ...]``. ``--node-arg`` is appended to every node's command line, so
two runs with different node settings can be compared on the same machine.

What is measured (one durability mode per run, "fsync" by default):
- ``produce-latency``: one synchronous single-message Produce at a time, p50/p99, for 100 B
  and 1 KiB, through the raw gRPC stub and through the typed ``Producer.send`` (idempotent).
- ``produce``: batch-256, 100 B, 16 requests in flight (the throughput cost of a setting).
- ``failover``: a typed Producer sends 100 B messages one by one; the leader is SIGKILLed;
  the figure is the time from the kill to the first send acknowledged by another member.
  The nodes' logs split it into the election (kill to "leader in term" on the new leader)
  and the rest (the new leader's no-op, the client finding it). The killed node is restarted
  and the cluster settles between rounds.

Rules this module keeps: every loop is bounded in count and time (``run_bounded`` and
explicit deadlines); the cluster is always stopped (try/finally) and only the processes this
bench started are signalled (``LocalCluster`` does so by recorded PID).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import grpc

from raftlog.bench.cluster import (
    CHANNEL_OPTIONS,
    CLUSTER_START_TIMEOUT_S,
    PRODUCER_STUB,
    BenchError,
    Measurement,
    measure_latency_producer,
    measure_latency_stub,
    measure_produce,
    source_description,
    topic_name,
)
from raftlog.bench.report import Budget, write_json_report
from raftlog.client.admin import Admin
from raftlog.client.errors import RaftlogError
from raftlog.client.producer import Producer
from raftlog.node.local_cluster import LOG_FILE, LocalCluster

BODY_SIZES_BYTES = (100, 1024)
QUEUE_COUNT = 4
THROUGHPUT_BATCH = 256
THROUGHPUT_WINDOW = 16
FAILOVER_TOPIC = topic_name(100)
# How long a failover round may take before the run is declared broken.
FAILOVER_TIMEOUT_S = 20.0
# Quiet time after a restarted node rejoins, so the next kill starts from a settled cluster.
SETTLE_S = 1.0
_LEADER_LINE = re.compile(r"^(\S+ \S+) INFO \S+: leader in term (\d+)")


@dataclass(slots=True)
class Failover:
    """One failover round, in milliseconds from the SIGKILL."""

    killed: str
    to_first_ack_ms: float
    to_new_leader_ms: float | None


def _leader_node(cluster: LocalCluster) -> str:
    address = cluster.leader_address()
    for node_id, node in cluster.nodes.items():
        if node.address == address:
            return node_id
    raise BenchError("the cluster reports no leader")


def _leader_since(cluster: LocalCluster, node_id: str, after_s: float) -> float | None:
    """When ``node_id``'s log says it became leader after wall time ``after_s`` (None if not
    logged); the log's timestamps have millisecond resolution."""
    path = os.path.join(cluster.nodes[node_id].data_dir, LOG_FILE)
    with open(path, errors="replace") as log:
        for line in log:
            match = _LEADER_LINE.match(line)
            if match is None:
                continue
            stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
            at_s = stamp.timestamp()
            if at_s >= after_s - 0.001:
                return at_s
    return None


def measure_failover(cluster: LocalCluster, producer: Producer) -> Failover:
    """Kill the leader while ``producer`` sends; time the first ack from another member."""
    killed = _leader_node(cluster)
    killed_address = cluster.nodes[killed].address
    stop = threading.Event()
    acks: list[tuple[float, str | None]] = []
    failures: list[BaseException] = []

    def send_loop() -> None:
        deadline = time.monotonic() + FAILOVER_TIMEOUT_S
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                producer.send(FAILOVER_TOPIC, b"f" * 100, queue_id=0)
            except RaftlogError as error:
                failures.append(error)
                continue
            acks.append((time.monotonic(), producer.connection.leader_address))

    sender = threading.Thread(target=send_loop, name="failover-load", daemon=True)
    sender.start()
    time.sleep(0.5)  # under load when the leader dies
    killed_at = time.monotonic()
    killed_wall_s = time.time()
    cluster.kill(killed)
    deadline = killed_at + FAILOVER_TIMEOUT_S
    first_ack: float | None = None
    while first_ack is None and time.monotonic() < deadline:
        first_ack = next(
            (at for at, leader in list(acks) if at > killed_at and leader != killed_address),
            None,
        )
        time.sleep(0.005)
    stop.set()
    sender.join(FAILOVER_TIMEOUT_S)
    if first_ack is None:
        raise BenchError(f"no produce acknowledged within {FAILOVER_TIMEOUT_S} s: {failures[:1]}")
    new_leader = _leader_node(cluster)
    became_s = _leader_since(cluster, new_leader, killed_wall_s)
    cluster.restart(killed)
    time.sleep(SETTLE_S)
    return Failover(
        killed=killed,
        to_first_ack_ms=(first_ack - killed_at) * 1000,
        to_new_leader_ms=None if became_s is None else (became_s - killed_wall_s) * 1000,
    )


def run(
    root: str,
    durability: str,
    node_args: Sequence[str],
    latency: Budget,
    throughput: Budget,
    failovers: int,
) -> tuple[list[Measurement], list[Failover]]:
    base_dir = tempfile.mkdtemp(prefix=f"latency-{durability}-", dir=root)
    cluster = LocalCluster(
        base_dir, node_count=3, base_port=0, durability=durability, extra_args=node_args
    )
    rows: list[Measurement] = []
    rounds: list[Failover] = []
    try:
        cluster.start(CLUSTER_START_TIMEOUT_S)
        leader = cluster.leader_address()
        if leader is None:
            raise BenchError("the cluster elected no leader")
        with (
            Admin(cluster.addresses) as admin,
            grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as channel,
        ):
            for body_bytes in BODY_SIZES_BYTES:
                admin.create_topic(topic_name(body_bytes), QUEUE_COUNT)
            stub = PRODUCER_STUB(channel)
            measure_produce(stub, durability, 100, 16, 4, Budget(2_000, 1.0))  # warm-up
            for body_bytes in BODY_SIZES_BYTES:
                for row in (
                    measure_latency_stub(stub, durability, body_bytes, latency),
                    measure_latency_producer(cluster.addresses, durability, body_bytes, latency),
                ):
                    _progress(row)
                    rows.append(row)
            row = measure_produce(
                stub, durability, 100, THROUGHPUT_BATCH, THROUGHPUT_WINDOW, throughput
            )
            _progress(row)
            rows.append(row)
        with Producer(cluster.addresses, timeout_s=FAILOVER_TIMEOUT_S) as producer:
            for _ in range(failovers):
                round_ = measure_failover(cluster, producer)
                print(f"  failover: {round_}", file=sys.stderr, flush=True)
                rounds.append(round_)
    finally:
        cluster.stop(timeout_s=15)
        shutil.rmtree(base_dir, ignore_errors=True)
    return rows, rounds


def _progress(row: Measurement) -> None:
    settings = " ".join(f"{name}={value}" for name, value in row.params.items())
    p50 = "" if row.latency_p50_ms is None else f" p50 {row.latency_p50_ms:.2f} ms"
    p99 = "" if row.latency_p99_ms is None else f" p99 {row.latency_p99_ms:.2f} ms"
    print(
        f"  {row.workload} {settings}: {row.msgs_per_s:,.0f} msgs/s{p50}{p99}",
        file=sys.stderr,
        flush=True,
    )


def render(rows: Sequence[Measurement], rounds: Sequence[Failover]) -> str:
    lines = [
        "| workload | body B | batch | in flight | client | msgs/s | p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        p = row.params
        p50 = "-" if row.latency_p50_ms is None else f"{row.latency_p50_ms:.2f}"
        p99 = "-" if row.latency_p99_ms is None else f"{row.latency_p99_ms:.2f}"
        lines.append(
            f"| {row.workload} | {p['body_bytes']} | {p['batch_size']} | {p['window']} | "
            f"{p['client']} | {row.msgs_per_s:,.0f} | {p50} | {p99} |"
        )
    if rounds:
        acks = [r.to_first_ack_ms for r in rounds]
        elected = [r.to_new_leader_ms for r in rounds if r.to_new_leader_ms is not None]
        lines.append("")
        lines.append(
            f"failover ({len(rounds)} rounds): first ack median {statistics.median(acks):.0f} ms "
            f"(min {min(acks):.0f}, max {max(acks):.0f}); new leader logged median "
            + (f"{statistics.median(elected):.0f} ms" if elected else "-")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raftlog.bench.latency", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    parser.add_argument("--dir", default="./data/bench", help="where the cluster's data goes")
    parser.add_argument("--durability", choices=("fsync", "write"), default="fsync")
    parser.add_argument(
        "--node-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="appended to every node's command line (repeatable), e.g. --node-arg=--tick-ms=20",
    )
    parser.add_argument("--samples", type=int, default=2_000, help="sends per latency row")
    parser.add_argument("--max-seconds", type=float, default=10.0, help="per latency row")
    parser.add_argument("--throughput-seconds", type=float, default=3.0)
    parser.add_argument("--failovers", type=int, default=5, help="leader kills (0: none)")
    args = parser.parse_args(argv)
    if args.samples < 1 or args.max_seconds <= 0 or args.throughput_seconds <= 0:
        parser.error("--samples, --max-seconds and --throughput-seconds must be positive")
    if not 0 <= args.failovers <= 50:
        parser.error("--failovers must be 0..50")
    latency = Budget(args.samples, args.max_seconds)
    throughput = Budget(500_000, args.throughput_seconds)
    os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="bench-latency-", dir=args.dir)
    source = source_description()
    try:
        rows, rounds = run(
            root, args.durability, args.node_arg, latency, throughput, args.failovers
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(render(rows, rounds))
    if args.json:
        write_json_report(
            args.json,
            "latency",
            latency,
            1,
            rows,
            failovers=[asdict(r) for r in rounds],
            node_args=list(args.node_arg),
            source=source,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
