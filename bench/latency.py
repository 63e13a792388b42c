"""The latency and failover benchmark: single-message produce latency, batch-256 throughput and
leader failover time on real local 3-node clusters, side by side when asked.

Run by hand (it is not a timed test): ``python -m raftlog.bench.latency [--json PATH]
[--node-arg=--tick-ms=50 ...] [--code DIR --code DIR]``. ``--node-arg`` is appended to every
node's command line. ``--code`` (repeatable) runs one cluster per raftlog source tree (e.g.
``git archive <commit> | tar -x -C DIR``) at the same time and interleaves the measurements,
so a before/after comparison on this shared machine sees the same neighbours' load on both
sides; the clients are always this checkout's.

What is measured (one durability mode per run, "fsync" by default):
- ``produce-latency``: one synchronous single-message Produce at a time, p50/p99, for 100 B
  and 1 KiB, through the raw gRPC stub and through the typed ``Producer.send`` (idempotent),
  in ``--rounds`` bursts that alternate between the clusters.
- ``produce``: batch-256, 100 B, 16 requests in flight, twice per cluster (alternating).
- ``failover``: a typed Producer sends 100 B messages one by one; the leader is SIGKILLed;
  the figure is the time from the kill to the first send acknowledged by another member.
  The nodes' logs split it into the election (kill to "leader in term" on the new leader)
  and the rest (the new leader's no-op, the client finding it). The killed node is restarted
  and the cluster settles between rounds.

Rules this module keeps: every loop is bounded in count and time (``run_bounded`` and
explicit deadlines); the clusters are always stopped (try/finally) and only the processes
this bench started are signalled (``LocalCluster`` does so by recorded PID).
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import grpc

from raftlog.bench.cluster import (
    CHANNEL_OPTIONS,
    CLUSTER_START_TIMEOUT_S,
    PRODUCER_STUB,
    RPC_TIMEOUT_S,
    BenchError,
    Measurement,
    measure_produce,
    percentile_ms,
    request_pool,
    source_description,
    topic_name,
)
from raftlog.bench.report import Budget, run_bounded, write_json_report
from raftlog.client.admin import Admin
from raftlog.client.errors import RaftlogError
from raftlog.client.producer import Producer
from raftlog.testing.local_cluster import LOG_FILE, LocalCluster

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
    code: str = ""


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


class TreeCluster(LocalCluster):
    """A local cluster whose nodes run the raftlog source tree ``code_dir`` (a checkout or a
    ``git archive`` of another commit) instead of this one: the nodes start in that directory
    with it first on PYTHONPATH, so ``python -m raftlog.cli`` imports its code."""

    def __init__(self, code_dir: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.code_dir = os.path.abspath(code_dir)

    def command(self, node_id: str) -> list[str]:
        return [
            "env",
            "-C",
            self.code_dir,
            f"PYTHONPATH={self.code_dir}",
            *super().command(node_id),
        ]


@dataclass
class Side:
    """One cluster under measurement and the clients bound to it."""

    label: str
    cluster: LocalCluster
    stub: Any = None
    producer: Producer | None = None


def _start(side: Side, durability: str) -> None:
    side.cluster.start(CLUSTER_START_TIMEOUT_S)
    leader = side.cluster.leader_address()
    if leader is None:
        raise BenchError(f"{side.label}: the cluster elected no leader")
    with Admin(side.cluster.addresses) as admin:
        for body_bytes in BODY_SIZES_BYTES:
            admin.create_topic(topic_name(body_bytes), QUEUE_COUNT)
    side.stub = PRODUCER_STUB(grpc.insecure_channel(leader, options=CHANNEL_OPTIONS))
    side.producer = Producer(side.cluster.addresses, timeout_s=FAILOVER_TIMEOUT_S)
    measure_produce(side.stub, durability, 100, 16, 4, Budget(2_000, 1.0))  # warm-up
    side.producer.send(topic_name(100), b"w", queue_id=0)  # learn the leader, untimed


def _latency_rows(
    sides: Sequence[Side], durability: str, latency: Budget, rounds: int
) -> list[Measurement]:
    """Every (body, client) row, measured in ``rounds`` bursts that alternate between the
    sides, so a neighbour's load on this shared machine falls on all of them alike."""
    burst = Budget(max(1, latency.max_count // rounds), latency.max_seconds / rounds)
    requests = {body: request_pool(body, 1) for body in BODY_SIZES_BYTES}
    samples: dict[tuple[str, int, str], list[float]] = {}
    for round_index in range(rounds):
        order = sides if round_index % 2 == 0 else list(reversed(sides))
        for body_bytes in BODY_SIZES_BYTES:
            for client in ("grpc-stub", "producer"):
                for side in order:
                    taken = samples.setdefault((side.label, body_bytes, client), [])
                    send = _sender(side, client, body_bytes, requests[body_bytes])

                    def step(send: Callable[[int], None] = send, taken: list[float] = taken) -> int:
                        began = time.perf_counter()
                        send(len(taken))
                        taken.append(time.perf_counter() - began)
                        return 1

                    run_bounded(step, burst)
    rows = []
    for (label, body_bytes, client), taken in samples.items():
        taken.sort()
        rows.append(
            Measurement(
                "produce-latency",
                {
                    "code": label,
                    "durability": durability,
                    "body_bytes": body_bytes,
                    "batch_size": 1,
                    "window": 1,
                    "client": client,
                },
                len(taken),
                sum(taken),
                latency_p50_ms=percentile_ms(taken, 0.50),
                latency_p99_ms=percentile_ms(taken, 0.99),
            )
        )
    return rows


def _sender(
    side: Side, client: str, body_bytes: int, requests: Sequence[Any]
) -> Callable[[int], None]:
    """``send(i)``: the i-th single-message produce of a row, by ``client``."""
    if client == "grpc-stub":

        def send_stub(i: int) -> None:
            try:
                side.stub.Produce(requests[i % len(requests)], timeout=RPC_TIMEOUT_S)
            except grpc.RpcError as error:
                raise BenchError(f"Produce failed: {error}") from None

        return send_stub
    producer = side.producer
    assert producer is not None
    body = b"x" * body_bytes
    topic = topic_name(body_bytes)

    def send_typed(i: int) -> None:
        producer.send(topic, body, tags="bench", queue_id=i % QUEUE_COUNT)

    return send_typed


def run(
    root: str,
    durability: str,
    node_args: Sequence[str],
    code_dirs: Sequence[str],
    latency: Budget,
    rounds: int,
    throughput: Budget,
    failovers: int,
) -> tuple[list[Measurement], list[Failover]]:
    """Start one cluster per source tree (this checkout when none is given), measure them
    side by side, and always stop them."""
    sides: list[Side] = []
    for code_dir in code_dirs or [""]:
        base_dir = tempfile.mkdtemp(prefix=f"latency-{durability}-", dir=root)
        cluster = (
            TreeCluster(code_dir, base_dir, 3, 0, durability=durability, extra_args=node_args)
            if code_dir
            else LocalCluster(base_dir, 3, 0, durability=durability, extra_args=node_args)
        )
        sides.append(Side(code_dir or "this checkout", cluster))
    rows: list[Measurement] = []
    rounds_done: list[Failover] = []
    try:
        for side in sides:
            _start(side, durability)
        rows += _latency_rows(sides, durability, latency, rounds)
        for repeat in range(2):
            for side in sides if repeat == 0 else list(reversed(sides)):
                row = measure_produce(
                    side.stub, durability, 100, THROUGHPUT_BATCH, THROUGHPUT_WINDOW, throughput
                )
                row.params["code"] = side.label
                rows.append(row)
        for row in rows:
            _progress(row)
        for _ in range(failovers):
            for side in sides:
                assert side.producer is not None
                round_ = measure_failover(side.cluster, side.producer)
                round_.code = side.label
                print(f"  failover: {round_}", file=sys.stderr, flush=True)
                rounds_done.append(round_)
    finally:
        for side in sides:
            if side.producer is not None:
                side.producer.close(timeout_s=5)
            side.cluster.stop(timeout_s=15)
            shutil.rmtree(side.cluster.base_dir, ignore_errors=True)
    return rows, rounds_done


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
        "| code | workload | body B | batch | in flight | client | msgs/s | p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        p = row.params
        p50 = "-" if row.latency_p50_ms is None else f"{row.latency_p50_ms:.2f}"
        p99 = "-" if row.latency_p99_ms is None else f"{row.latency_p99_ms:.2f}"
        lines.append(
            f"| {p['code']} | {row.workload} | {p['body_bytes']} | {p['batch_size']} | "
            f"{p['window']} | {p['client']} | {row.msgs_per_s:,.0f} | {p50} | {p99} |"
        )
    for code in dict.fromkeys(r.code for r in rounds):
        mine = [r for r in rounds if r.code == code]
        acks = [r.to_first_ack_ms for r in mine]
        elected = [r.to_new_leader_ms for r in mine if r.to_new_leader_ms is not None]
        lines.append(
            f"failover, {code} ({len(mine)} rounds): first ack median "
            f"{statistics.median(acks):.0f} ms (min {min(acks):.0f}, max {max(acks):.0f}); "
            "new leader logged median "
            + (f"{statistics.median(elected):.0f} ms" if elected else "-")
        )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
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
    parser.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="DIR",
        help="a raftlog source tree whose nodes to measure (repeatable: the trees are "
        "measured side by side, interleaved), e.g. a `git archive` of another commit; "
        "default: this checkout",
    )
    parser.add_argument("--samples", type=int, default=2_000, help="sends per latency row")
    parser.add_argument("--max-seconds", type=float, default=10.0, help="per latency row")
    parser.add_argument(
        "--rounds", type=int, default=5, help="bursts per latency row, alternating the trees"
    )
    parser.add_argument("--throughput-seconds", type=float, default=3.0)
    parser.add_argument("--failovers", type=int, default=5, help="leader kills (0: none)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.samples < 1 or args.max_seconds <= 0 or args.throughput_seconds <= 0:
        parser.error("--samples, --max-seconds and --throughput-seconds must be positive")
    if not 0 <= args.failovers <= 50:
        parser.error("--failovers must be 0..50")
    if not 1 <= args.rounds <= 100:
        parser.error("--rounds must be 1..100")
    for code_dir in args.code:
        # raftlog/cli is a package now; earlier trees (measured side by side) had cli.py.
        cli = os.path.join(code_dir, "raftlog", "cli")
        if not (os.path.isdir(cli) or os.path.isfile(cli + ".py")):
            parser.error(f"--code {code_dir}: not a raftlog source tree (no raftlog/cli)")
    latency = Budget(args.samples, args.max_seconds)
    throughput = Budget(500_000, args.throughput_seconds)
    os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="bench-latency-", dir=args.dir)
    source = source_description()
    try:
        rows, rounds = run(
            root,
            args.durability,
            args.node_arg,
            args.code,
            latency,
            args.rounds,
            throughput,
            args.failovers,
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
            code=list(args.code) or ["this checkout"],
            source=source,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
