"""The pull benchmark: consume throughput of a real local 3-node cluster, per Pull form.

Run by hand (it is not a timed test): ``python -m raftlog.bench.pull [--json PATH]``. It
starts three node processes on 127.0.0.1, fills one topic per body size (100 B, 1 KiB) with
``--messages`` messages, waits until a follower has them all, then reads every queue from its
first to its last offset, from the leader and from that follower, in each form:

- ``messages``: the original answer, one ``StoredMessage`` per message (raw gRPC stub);
- ``records``: ``return_records``, the stored records' bytes; the client only counts them
  (what the serving node and the transport can deliver);
- ``records+decode``: ``return_records``, every record verified (body CRC and ``__CRC32#``
  trailer) and turned into a ``Message`` by ``messages_from_records``, as the typed consumer
  does;
- ``consumer``: the typed ``Consumer.poll`` (``from_beginning``), which uses the fast form.

Rules this module keeps:
- Every measured loop is bounded by a message count AND a time budget (``run_bounded``); every
  wait (cluster start, follower catch-up) is bounded in time too.
- Messages look like the cluster benchmark's: an explicit queue id (round robin over
  ``--queues``), a tag and a unique key, so a queue's records lie between other queues'.
- Each form is measured ``--rounds`` times, the forms alternating; the table shows each
  one's best round and every round (the machine is shared: load from elsewhere only slows).
- The cluster's data lives in a fresh temporary directory under ``--dir`` and is deleted at the
  end; the cluster is always stopped, and only its own node processes are signalled.
- MB/s counts message bodies only, in MiB. The client shares the machine with the nodes.
  Each row also has the CPU per message of the serving node and of the client (from
  /proc/<pid>/stat and ``process_time``), which a busy machine disturbs far less.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from raftlog.bench.cluster import (
    CHANNEL_OPTIONS,
    CLUSTER_START_TIMEOUT_S,
    CONSUMER_STUB,
    PRODUCER_STUB,
    RPC_TIMEOUT_S,
    BenchError,
    Measurement,
    produce_windowed,
    source_description,
    wait_caught_up,
)
from raftlog.bench.report import Budget, run_bounded, write_json_report
from raftlog.client.admin import Admin
from raftlog.client.consumer import Consumer
from raftlog.client.pulled_records import messages_from_records
from raftlog.proto import client_pb2
from raftlog.testing.local_cluster import LocalCluster

BODY_SIZES_BYTES = (100, 1024)
FORMS = ("messages", "records", "records+decode", "consumer")
PRODUCE_BATCH = 256
PRODUCE_WINDOW = 8
# Requests cycled through while filling a topic (unique keys repeat every this many batches).
REQUEST_POOL_SIZE = 16


def _topic(body_bytes: int) -> str:
    return f"pull-{body_bytes}b"


def fill(stub: Any, body_bytes: int, queue_count: int, message_count: int) -> int:
    """Produce ``message_count`` messages (rounded up to whole batches) into the body size's
    topic, round robin over the queues; returns how many were acknowledged."""
    body = b"x" * body_bytes
    requests = [
        client_pb2.ProduceRequest(
            topic=_topic(body_bytes),
            messages=[
                client_pb2.ProduceMessage(
                    queue_id=i % queue_count,
                    tags="bench",
                    uniq_key=uuid.uuid4().hex.upper(),
                    body=body,
                )
                for i in range(PRODUCE_BATCH)
            ],
        )
        for _ in range(REQUEST_POOL_SIZE)
    ]
    acked, _ = produce_windowed(
        stub, requests, PRODUCE_BATCH, PRODUCE_WINDOW, Budget(message_count, 600.0)
    )
    return acked


class _Done(Exception):
    """Raised inside a pull loop once every queue has been read to its end."""


def _pull_step(
    stub: Any,
    topic: str,
    bounds: dict[int, tuple[int, int]],
    max_messages: int,
    form: str,
) -> Callable[[], int]:
    """One Pull per call, queue after queue; returns the messages it read."""
    pending = [(q, first, end) for q, (first, end) in sorted(bounds.items()) if end > first]

    def step() -> int:
        if not pending:
            raise _Done
        queue_id, offset, end = pending[0]
        response = stub.Pull(
            client_pb2.PullRequest(
                topic=topic,
                queue_id=queue_id,
                queue_offset=offset,
                max_messages=max_messages,
                return_records=form != "messages",
            ),
            timeout=RPC_TIMEOUT_S,
        )
        if form == "messages":
            count = len(response.messages)
        elif form == "records":
            count = response.record_count
        else:
            count = len(messages_from_records(response.records))
        if count == 0:
            raise BenchError(f"Pull {topic}/{queue_id}@{offset}: status {response.status}")
        if response.next_queue_offset >= end:
            pending.pop(0)
        else:
            pending[0] = (queue_id, response.next_queue_offset, end)
        return count

    return step


def _consumer_step(address: str, topic: str, max_messages: int, total: int) -> Callable[[], int]:
    # A group of its own per measurement: a consumer of a group another one just left would
    # wait for the group's rebalance before it reads anything.
    group = f"bench-pull-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        address, group=group, topic=topic, from_beginning=True, max_messages=max_messages
    )
    read = [0]

    def step() -> int:
        if read[0] >= total:
            consumer.close()
            raise _Done
        count = len(consumer.poll(timeout_s=1.0))
        if count == 0:
            consumer.close()
            raise BenchError(f"Consumer.poll on {topic} returned nothing after {read[0]}")
        read[0] += count
        return count

    return step


@dataclass(slots=True)
class PullMeasurement(Measurement):
    """A pull row with the CPU it cost per message: the serving node's (its process's user +
    system time) and this client process's. CPU per message hardly depends on how busy the
    shared machine is, unlike msgs/s."""

    server_cpu_us_per_msg: float = 0.0
    client_cpu_us_per_msg: float = 0.0


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    step: Callable[[], int],
    total: int,
    budget: Budget,
    server_pid: int,
    params: dict[str, object],
) -> PullMeasurement:
    server_cpu_s = _process_cpu_s(server_pid)
    client_cpu_s = time.process_time()
    start = time.perf_counter()
    try:
        done, _ = run_bounded(step, budget)
    except _Done:
        done = total
    seconds = time.perf_counter() - start
    per_message_us = 1e6 / max(done, 1)
    return PullMeasurement(
        "pull",
        params,
        done,
        seconds,
        server_cpu_us_per_msg=(_process_cpu_s(server_pid) - server_cpu_s) * per_message_us,
        client_cpu_us_per_msg=(time.process_time() - client_cpu_s) * per_message_us,
    )


def run(args: argparse.Namespace, root: str) -> list[PullMeasurement]:
    base_dir = tempfile.mkdtemp(prefix="cluster-", dir=root)
    cluster = LocalCluster(base_dir, node_count=3, base_port=0)
    rows: list[PullMeasurement] = []
    budget = Budget(args.messages, args.max_seconds)
    try:
        cluster.start(CLUSTER_START_TIMEOUT_S)
        leader = cluster.leader_address()
        if leader is None:
            raise BenchError("the cluster elected no leader")
        follower = next(a for a in cluster.addresses if a != leader)
        pids = {node.address: node.pid for node in cluster.nodes.values()}
        print(f"cluster up, leader {leader}", file=sys.stderr, flush=True)
        with (
            Admin(cluster.addresses) as admin,
            grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as leader_channel,
            grpc.insecure_channel(follower, options=CHANNEL_OPTIONS) as follower_channel,
        ):
            for body_bytes in args.body_bytes:
                topic = _topic(body_bytes)
                admin.create_topic(topic, args.queues)
                acked = fill(PRODUCER_STUB(leader_channel), body_bytes, args.queues, args.messages)
                wait_caught_up(admin, topic, leader, follower)
                described = admin.describe_topic(topic, address=leader)
                bounds = {
                    q.queue_id: (q.min_queue_offset, q.max_queue_offset) for q in described.queues
                }
                total = sum(end - first for first, end in bounds.values())
                print(f"{topic}: {acked} messages stored", file=sys.stderr, flush=True)
                # Rounds alternate the forms, so a burst of load from elsewhere on the
                # machine hits them alike; the table keeps each one's best round.
                for round_number, role, address, channel in (
                    (r, role, address, channel)
                    for r in range(args.rounds)
                    for role, address, channel in (
                        ("leader", leader, leader_channel),
                        ("follower", follower, follower_channel),
                    )
                ):
                    for form in args.forms:
                        if form == "consumer":
                            step = _consumer_step(address, topic, args.max_messages, total)
                        else:
                            step = _pull_step(
                                CONSUMER_STUB(channel), topic, bounds, args.max_messages, form
                            )
                        row = _measure_row(
                            step,
                            total,
                            budget,
                            pids[address],
                            address,
                            body_bytes,
                            args,
                            role,
                            form,
                            round_number,
                        )
                        rows.append(row)
    finally:
        cluster.stop(timeout_s=15)
        shutil.rmtree(base_dir, ignore_errors=True)
    return rows


def _measure_row(
    step: Callable[[], int],
    total: int,
    budget: Budget,
    server_pid: int | None,
    address: str,
    body_bytes: int,
    args: argparse.Namespace,
    role: str,
    form: str,
    round_number: int,
) -> PullMeasurement:
    """One measured row (reading ``total`` messages with ``step``), printed as it comes."""
    if server_pid is None:
        raise BenchError(f"no process id for the node at {address}")
    row = measure(
        step,
        total,
        budget,
        server_pid,
        {
            "body_bytes": body_bytes,
            "max_messages": args.max_messages,
            "from": role,
            "form": form,
            "queues": args.queues,
            "round": round_number,
        },
    )
    print(
        f"  {body_bytes} B from {role}, {form}: {row.msgs_per_s:,.0f} "
        f"msgs/s, server {row.server_cpu_us_per_msg:.1f} us/msg, client "
        f"{row.client_cpu_us_per_msg:.1f} us/msg",
        file=sys.stderr,
        flush=True,
    )
    return row


def best_rounds(rows: list[PullMeasurement]) -> list[tuple[PullMeasurement, list[float]]]:
    """Per (body size, member, form), in first-seen order: the best round and every round's
    msgs/s."""
    rounds: dict[tuple[object, object, object], list[PullMeasurement]] = {}
    for row in rows:
        key = (row.params["body_bytes"], row.params["from"], row.params["form"])
        rounds.setdefault(key, []).append(row)
    return [
        (max(same, key=lambda r: r.msgs_per_s), [r.msgs_per_s for r in same])
        for same in rounds.values()
    ]


def render_table(rows: list[PullMeasurement]) -> str:
    lines = [
        "| body B | from | form | max messages | msgs/s (best round) | MB/s | server CPU µs/msg "
        "| client CPU µs/msg | every round msgs/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for best, every in best_rounds(rows):
        p = best.params
        lines.append(
            f"| {p['body_bytes']} | {p['from']} | {p['form']} | {p['max_messages']} | "
            f"{best.msgs_per_s:,.0f} | {best.mb_per_s:,.2f} | {best.server_cpu_us_per_msg:.1f} | "
            f"{best.client_cpu_us_per_msg:.1f} | {' / '.join(f'{v:,.0f}' for v in every)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raftlog.bench.pull", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    parser.add_argument("--dir", default="./data/bench", help="where the cluster's data goes")
    parser.add_argument("--messages", type=int, default=100_000, help="per body size")
    parser.add_argument("--max-seconds", type=float, default=10.0, help="per measurement")
    parser.add_argument("--max-messages", type=int, default=1024, help="per Pull")
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="measurements per form")
    parser.add_argument(
        "--body-bytes", type=int, nargs="+", default=list(BODY_SIZES_BYTES), metavar="N"
    )
    parser.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS))
    args = parser.parse_args(argv)
    if min(args.messages, args.max_messages, args.queues, args.rounds) < 1 or args.max_seconds <= 0:
        parser.error(
            "--messages, --max-seconds, --max-messages, --queues and --rounds must be positive"
        )
    os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="bench-pull-", dir=args.dir)
    source = source_description()
    try:
        rows = run(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(render_table(rows))
    if args.json:
        write_json_report(
            args.json,
            "pull",
            Budget(args.messages, args.max_seconds),
            1,
            rows,
            source=source,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
