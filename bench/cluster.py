"""The cluster benchmark: produce throughput, produce latency and pull throughput measured on a
real local 3-node cluster (three node processes on 127.0.0.1), in both durability modes.

Run by hand (it is not a timed test): ``python -m raftlog.bench.cluster [--quick] [--json PATH]``
or ``raftlog bench cluster``. It prints a table; ``--json`` writes every measurement with its
parameters, the cluster it ran on and the machine description, so runs can be compared.

What is measured, per durability mode ("fsync": acked once a majority fsynced, the default;
"write": acked once a majority wrote) and per body size (100 B, 1 KiB):
- ``produce``: throughput at batch sizes 1, 16 and 256 with 1, 4, 16 and 64 requests in flight.
  Every (batch, window) pair is a row in the JSON; the table shows the best window per batch.
- ``produce-latency``: single-message synchronous produce, one request in flight, p50/p99.
  Measured twice: through the raw gRPC stub, and through the typed ``Producer.send`` (which
  adds its sender-thread hand-off, retry policy and idempotence) to show the client's cost.
- ``pull``: reading back everything produced for that body size, queue by queue, in pulls of
  up to ``PULL_MAX_MESSAGES``, from the leader and from a follower.

Rules this module keeps:
- Every measured loop is bounded by a message count AND a time budget (``run_bounded``); every
  wait (cluster start, follower catch-up, in-flight drain) is bounded in time too.
- The hot loops use the raw gRPC stubs (``raftlog.proto.client_pb2_grpc``), not the typed
  client: ``Producer`` sends one batch at a time from one sender thread, so it cannot hold
  several requests in flight, and it builds each message's proto per send. Requests are built
  before the timed loop (a producer hands them over ready); protobuf serialisation, the gRPC
  round trip and response decoding are counted. Writes are not idempotent (no producer id), so
  several may be in flight without sequence ordering.
- Messages look like what the typed client sends: an explicit queue id, a tag, a unique key
  (so the IndexFile is written as in real use), no other keys or properties.
- MB/s counts message bodies only, in MiB (as the store benchmark does).
- The cluster's data lives in a fresh temporary directory under ``--dir`` and is deleted at the
  end; the cluster is always stopped (try/finally), and only the node processes this bench
  started are signalled (``LocalCluster`` signals by recorded PID only).
- The client runs on the same machine as the three nodes and competes with them for CPU: the
  figures are a whole-system measurement of one box, not of a node alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import grpc

from raftlog.bench.report import Budget, run_bounded, write_json_report
from raftlog.client.admin import Admin
from raftlog.client.producer import Producer
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import LocalCluster

DURABILITY_MODES = ("fsync", "write")
BODY_SIZES_BYTES = (100, 1024)
BATCH_SIZES = (1, 16, 256)
# Requests in flight; 64 shows whether 16 was already past the knee.
WINDOWS = (1, 4, 16, 64)
QUEUE_COUNT = 4
PULL_MAX_MESSAGES = 256
# Distinct prebuilt requests cycled through per (body, batch): enough that unique keys do not
# repeat often, few enough to build in well under a second.
REQUEST_POOL_SIZE = 32
MIB = 1024 * 1024
# As client.proto asks: bodies may be up to 4 MiB, so allow 64 MiB messages both ways.
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 * MIB),
    ("grpc.max_receive_message_length", 64 * MIB),
]
RPC_TIMEOUT_S = 30.0
CLUSTER_START_TIMEOUT_S = 60.0
CATCH_UP_TIMEOUT_S = 30.0
# The generated stub classes are untyped; typed as Any here, as client/connection.py does.
PRODUCER_STUB: Any = client_pb2_grpc.ProducerStub
CONSUMER_STUB: Any = client_pb2_grpc.ConsumerStub


class BenchError(RuntimeError):
    """A request failed or a wait ran out of time: the run's figures would be meaningless."""


@dataclass(slots=True)
class Measurement:
    workload: str
    params: dict[str, object]
    messages: int
    seconds: float
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    msgs_per_s: float = field(init=False)
    mb_per_s: float = field(init=False)

    def __post_init__(self) -> None:
        body = int(str(self.params.get("body_bytes", 0)))
        self.msgs_per_s = self.messages / self.seconds if self.seconds > 0 else 0.0
        self.mb_per_s = self.msgs_per_s * body / MIB


@dataclass(frozen=True, slots=True)
class Budgets:
    """One budget per kind of measurement (each loop stops at its count or its time)."""

    produce: Budget
    latency: Budget
    pull: Budget
    # Unmeasured sends before the first measurement, so connection set-up, the first segment
    # file and the first election's leftovers are not counted.
    warm_up: Budget


def topic_name(body_bytes: int) -> str:
    return f"bench-{body_bytes}b"


def build_request(
    topic: str, body_bytes: int, batch_size: int, first: int, queue_count: int = QUEUE_COUNT
) -> Any:
    """One ProduceRequest of ``batch_size`` messages spread round robin over the queues."""
    body = b"x" * body_bytes
    return client_pb2.ProduceRequest(
        topic=topic,
        messages=[
            client_pb2.ProduceMessage(
                queue_id=(first + i) % queue_count,
                tags="bench",
                uniq_key=uuid.uuid4().hex.upper(),
                body=body,
            )
            for i in range(batch_size)
        ],
    )


def request_pool(body_bytes: int, batch_size: int) -> list[Any]:
    topic = topic_name(body_bytes)
    return [
        build_request(topic, body_bytes, batch_size, i * batch_size)
        for i in range(REQUEST_POOL_SIZE)
    ]


def _rpc_failure(error: grpc.RpcError) -> BenchError:
    code = error.code() if isinstance(error, grpc.Call) else None
    details = error.details() if isinstance(error, grpc.Call) else str(error)
    return BenchError(f"Produce failed: {code}: {details}")


def produce_windowed(
    stub: Any, requests: Sequence[Any], batch_size: int, window: int, budget: Budget
) -> tuple[int, float]:
    """Keep up to ``window`` Produce calls in flight (gRPC futures) until the budget is spent;
    returns (messages acknowledged, seconds from the first send to the last answer)."""
    slots = threading.Semaphore(window)
    lock = threading.Lock()
    acked = [0]
    failures: list[BenchError] = []
    cursor = [0]

    def answered(future: Any) -> None:
        try:
            future.result()
        except grpc.RpcError as error:
            with lock:
                failures.append(_rpc_failure(error))
        except Exception as error:  # e.g. cancelled: still a failed run, never a lost slot
            with lock:
                failures.append(BenchError(f"Produce failed: {error!r}"))
        else:
            with lock:
                acked[0] += batch_size
        finally:
            slots.release()

    def step() -> int:
        # A free slot appears when any call answers; the bound only guards a hung server.
        if not slots.acquire(timeout=RPC_TIMEOUT_S):
            raise BenchError(f"no Produce answered within {RPC_TIMEOUT_S} s")
        if failures:
            raise failures[0]
        request = requests[cursor[0] % len(requests)]
        cursor[0] += 1
        stub.Produce.future(request, timeout=RPC_TIMEOUT_S).add_done_callback(answered)
        return batch_size

    start = time.perf_counter()
    run_bounded(step, budget)
    # Drain: the figure counts only acknowledged messages, so wait for every call sent.
    for _ in range(window):
        if not slots.acquire(timeout=RPC_TIMEOUT_S):
            raise BenchError(f"in-flight Produce calls did not answer within {RPC_TIMEOUT_S} s")
    seconds = time.perf_counter() - start
    if failures:
        raise failures[0]
    return acked[0], seconds


def measure_produce(
    stub: Any, durability: str, body_bytes: int, batch_size: int, window: int, budget: Budget
) -> Measurement:
    messages, seconds = produce_windowed(
        stub, request_pool(body_bytes, batch_size), batch_size, window, budget
    )
    return Measurement(
        "produce",
        {
            "durability": durability,
            "body_bytes": body_bytes,
            "batch_size": batch_size,
            "window": window,
            "client": "grpc-stub",
        },
        messages,
        seconds,
    )


def percentile_ms(sorted_s: Sequence[float], fraction: float) -> float:
    if not sorted_s:
        return 0.0
    index = min(len(sorted_s) - 1, round(fraction * (len(sorted_s) - 1)))
    return sorted_s[index] * 1000.0


def _timed_calls(send: Callable[[int], None], budget: Budget) -> tuple[list[float], float]:
    """Call ``send(i)`` one at a time until the budget is spent; (each call's seconds, total)."""
    samples_s: list[float] = []

    def step() -> int:
        began = time.perf_counter()
        send(len(samples_s))
        samples_s.append(time.perf_counter() - began)
        return 1

    _, seconds = run_bounded(step, budget)
    return sorted(samples_s), seconds


def measure_latency_stub(
    stub: Any, durability: str, body_bytes: int, budget: Budget
) -> Measurement:
    requests = request_pool(body_bytes, 1)

    def send(i: int) -> None:
        try:
            stub.Produce(requests[i % len(requests)], timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as error:
            raise _rpc_failure(error) from None

    samples_s, seconds = _timed_calls(send, budget)
    return _latency_row("grpc-stub", durability, body_bytes, samples_s, seconds)


def measure_latency_producer(
    addresses: Sequence[str], durability: str, body_bytes: int, budget: Budget
) -> Measurement:
    """The typed client's ``send``: idempotent by default, one sender thread, a fresh UUID
    key per message; its connection finds the leader by redirect before the timed loop."""
    body = b"x" * body_bytes
    topic = topic_name(body_bytes)
    with Producer(list(addresses), timeout_s=RPC_TIMEOUT_S) as producer:
        producer.send(topic, body, tags="bench", queue_id=0)  # learn the leader, untimed

        def send(i: int) -> None:
            producer.send(topic, body, tags="bench", queue_id=i % QUEUE_COUNT)

        samples_s, seconds = _timed_calls(send, budget)
    return _latency_row("producer", durability, body_bytes, samples_s, seconds)


def _latency_row(
    client: str, durability: str, body_bytes: int, samples_s: list[float], seconds: float
) -> Measurement:
    return Measurement(
        "produce-latency",
        {
            "durability": durability,
            "body_bytes": body_bytes,
            "batch_size": 1,
            "window": 1,
            "client": client,
        },
        len(samples_s),
        seconds,
        latency_p50_ms=percentile_ms(samples_s, 0.50),
        latency_p99_ms=percentile_ms(samples_s, 0.99),
    )


class _PullDone(Exception):
    """Raised inside the pull loop once every queue has been read to its end."""


def queue_bounds(admin: Admin, topic: str, address: str) -> dict[int, tuple[int, int]]:
    described = admin.describe_topic(topic, address=address)
    return {q.queue_id: (q.min_queue_offset, q.max_queue_offset) for q in described.queues}


def wait_caught_up(admin: Admin, topic: str, leader: str, follower: str) -> None:
    """Wait (bounded) until ``follower`` has dispatched every message the leader has (the
    leader's bounds are read again each time: it may still be applying what it committed)."""
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    for _ in range(int(CATCH_UP_TIMEOUT_S / 0.05) + 1):
        if queue_bounds(admin, topic, follower) == queue_bounds(admin, topic, leader):
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    raise BenchError(f"{follower} did not catch up on {topic} within {CATCH_UP_TIMEOUT_S} s")


def measure_pull(
    channel: grpc.Channel,
    bounds: dict[int, tuple[int, int]],
    durability: str,
    body_bytes: int,
    role: str,
    budget: Budget,
) -> Measurement:
    """Read every queue from its first to its last offset, one queue after another."""
    stub = CONSUMER_STUB(channel)
    topic = topic_name(body_bytes)
    # (queue_id, next offset, end offset) per queue still to read, in queue order.
    pending = [(q, first, end) for q, (first, end) in sorted(bounds.items()) if end > first]
    total = sum(end - first for _, first, end in pending)

    def step() -> int:
        if not pending:
            raise _PullDone
        queue_id, offset, end = pending[0]
        response = stub.Pull(
            client_pb2.PullRequest(
                topic=topic,
                queue_id=queue_id,
                queue_offset=offset,
                max_messages=PULL_MAX_MESSAGES,
            ),
            timeout=RPC_TIMEOUT_S,
        )
        if not response.messages:
            raise BenchError(f"Pull {topic}/{queue_id}@{offset}: status {response.status}")
        if response.next_queue_offset >= end:
            pending.pop(0)
        else:
            pending[0] = (queue_id, response.next_queue_offset, end)
        return len(response.messages)

    done = 0
    start = time.perf_counter()
    try:
        done, _ = run_bounded(step, budget)
    except _PullDone:
        done = total
    seconds = time.perf_counter() - start
    return Measurement(
        "pull",
        {
            "durability": durability,
            "body_bytes": body_bytes,
            "max_messages": PULL_MAX_MESSAGES,
            "from": role,
            "client": "grpc-stub",
        },
        done,
        seconds,
    )


@contextlib.contextmanager
def running_cluster(
    durability: str, root: str, replication: str = "raft", master_role: str = "SYNC_MASTER"
) -> Iterator[tuple[LocalCluster, str]]:
    """A fresh 3-node cluster in ``durability`` mode under a new directory in ``root`` (Raft,
    or a master and two slaves), and its leader's (master's) address; always stopped and its
    data removed on the way out."""
    base_dir = tempfile.mkdtemp(prefix=f"cluster-{durability}-", dir=root)
    cluster = LocalCluster(
        base_dir,
        node_count=3,
        base_port=0,
        durability=durability,
        replication=replication,
        master_role=master_role,
    )
    try:
        cluster.start(CLUSTER_START_TIMEOUT_S)
        leader = cluster.leader_address()
        if leader is None:
            raise BenchError("the cluster elected no leader")
        yield cluster, leader
    finally:
        cluster.stop(timeout_s=15)
        shutil.rmtree(base_dir, ignore_errors=True)


def prepare_topics(admin: Admin, producer_stub: Any, warm_up: Budget) -> None:
    """Create one topic per body size, then send unmeasured batches within ``warm_up``."""
    for body_bytes in BODY_SIZES_BYTES:
        admin.create_topic(topic_name(body_bytes), QUEUE_COUNT)
    produce_windowed(producer_stub, request_pool(100, 16), 16, 4, warm_up)


def run_cluster(
    durability: str, root: str, budgets: Budgets, cluster_info: list[dict[str, object]]
) -> list[Measurement]:
    """Start a fresh 3-node cluster in ``durability`` mode, measure, and always stop it."""
    measurements: list[Measurement] = []
    with running_cluster(durability, root) as (cluster, leader):
        follower = next(a for a in cluster.addresses if a != leader)
        cluster_info.append(
            {
                "durability": durability,
                "leader": leader,
                "follower": follower,
                "nodes": {
                    n.node_id: {"address": n.address, "pid": n.pid} for n in cluster.nodes.values()
                },
            }
        )
        print(f"[{durability}] cluster up, leader {leader}", file=sys.stderr, flush=True)
        with (
            Admin(cluster.addresses) as admin,
            grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as leader_channel,
            grpc.insecure_channel(follower, options=CHANNEL_OPTIONS) as follower_channel,
        ):
            producer_stub = PRODUCER_STUB(leader_channel)
            prepare_topics(admin, producer_stub, budgets.warm_up)
            for body_bytes in BODY_SIZES_BYTES:
                for batch_size in BATCH_SIZES:
                    for window in WINDOWS:
                        row = measure_produce(
                            producer_stub,
                            durability,
                            body_bytes,
                            batch_size,
                            window,
                            budgets.produce,
                        )
                        _progress(row)
                        measurements.append(row)
                for row in (
                    measure_latency_stub(producer_stub, durability, body_bytes, budgets.latency),
                    measure_latency_producer(
                        cluster.addresses, durability, body_bytes, budgets.latency
                    ),
                ):
                    _progress(row)
                    measurements.append(row)
            for body_bytes in BODY_SIZES_BYTES:
                topic = topic_name(body_bytes)
                wait_caught_up(admin, topic, leader, follower)
                bounds = queue_bounds(admin, topic, leader)
                for role, channel in (("leader", leader_channel), ("follower", follower_channel)):
                    row = measure_pull(channel, bounds, durability, body_bytes, role, budgets.pull)
                    _progress(row)
                    measurements.append(row)
    return measurements


def _progress(row: Measurement) -> None:
    """One line per measurement on stderr, so a long run shows it is alive."""
    settings = " ".join(f"{name}={value}" for name, value in row.params.items())
    print(f"  {row.workload} {settings}: {row.msgs_per_s:,.0f} msgs/s", file=sys.stderr, flush=True)


def source_description() -> dict[str, object]:
    """The git commit the nodes ran from and the files modified in the working tree: the nodes
    run this checkout, uncommitted edits included, so a figure belongs to exactly this code."""
    repo = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, timeout=5
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "modified": []}
    return {"commit": commit or "unknown", "modified": [line[3:] for line in status]}


def best_per_batch(rows: Sequence[Measurement]) -> list[Measurement]:
    """Per (durability, body, batch): the produce row of the window with the most msgs/s."""
    best: dict[tuple[object, object, object], Measurement] = {}
    for row in rows:
        if row.workload != "produce":
            continue
        key = (row.params["durability"], row.params["body_bytes"], row.params["batch_size"])
        if key not in best or row.msgs_per_s > best[key].msgs_per_s:
            best[key] = row
    return list(best.values())


def render_table(rows: Sequence[Measurement]) -> str:
    lines = [
        "| workload | durability | body B | batch | in flight | client | msgs/s | MB/s "
        "| p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    # Latency rows, then pull rows; each keeps the run's order (durability, body size).
    rank = {"produce-latency": 0, "pull": 1}
    others = sorted((r for r in rows if r.workload != "produce"), key=lambda r: rank[r.workload])
    shown = best_per_batch(rows) + others
    for row in shown:
        p = row.params
        workload = "produce (best window)" if row.workload == "produce" else row.workload
        if row.workload == "pull":
            workload = f"pull from {p['from']}"
        p50 = "-" if row.latency_p50_ms is None else f"{row.latency_p50_ms:.2f}"
        p99 = "-" if row.latency_p99_ms is None else f"{row.latency_p99_ms:.2f}"
        lines.append(
            f"| {workload} | {p['durability']} | {p['body_bytes']} | "
            f"{p.get('batch_size', p.get('max_messages', '-'))} | {p.get('window', 1)} | "
            f"{p['client']} | {row.msgs_per_s:,.0f} | {row.mb_per_s:,.2f} | {p50} | {p99} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftlog bench cluster", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    parser.add_argument(
        "--dir", default="./data/bench", help="where the cluster's temporary data goes"
    )
    parser.add_argument("--quick", action="store_true", help="a few-second smoke run")
    parser.add_argument(
        "--durability",
        choices=(*DURABILITY_MODES, "both"),
        default="both",
        help="which durability mode(s) to measure (default both)",
    )
    parser.add_argument("--max-seconds", type=float, default=2.5, help="per produce measurement")
    parser.add_argument("--max-messages", type=int, default=500_000, help="per measurement")
    args = parser.parse_args(argv)
    if args.max_seconds <= 0 or args.max_messages < 1:
        parser.error("--max-seconds and --max-messages must be positive")
    if args.quick:
        budgets = Budgets(
            produce=Budget(1_000, 0.1),
            latency=Budget(30, 0.2),
            pull=Budget(20_000, 0.5),
            warm_up=Budget(100, 0.2),
        )
    else:
        budgets = Budgets(
            produce=Budget(args.max_messages, args.max_seconds),
            latency=Budget(min(args.max_messages, 3_000), 2 * args.max_seconds),
            pull=Budget(args.max_messages, 2 * args.max_seconds),
            warm_up=Budget(2_000, 1.0),
        )
    modes = DURABILITY_MODES if args.durability == "both" else (args.durability,)
    os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="bench-cluster-", dir=args.dir)
    rows: list[Measurement] = []
    cluster_info: list[dict[str, object]] = []
    # Taken before the nodes start: the code they import is the code as it is now.
    source = source_description()
    try:
        for durability in modes:
            rows += run_cluster(durability, root, budgets, cluster_info)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(render_table(rows))
    if args.json:
        write_json_report(
            args.json,
            "cluster",
            budgets.produce,
            1,
            rows,
            budgets=asdict(budgets),
            best_per_batch=[
                {**row.params, "msgs_per_s": row.msgs_per_s, "mb_per_s": row.mb_per_s}
                for row in best_per_batch(rows)
            ],
            clusters=cluster_info,
            source=source,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
