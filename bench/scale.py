"""The scale benchmark (issue 17): what a node costs once it holds a lot, measured on real local
clusters of node processes on 127.0.0.1.

``raftlog bench scale [--only PART ...] [--restart-gib 1] [--stored-gib 10] [--queues 10000]``

Parts (each runnable alone with ``--only``; ``restart`` and ``catchup`` share one cluster):
- ``restart``: a 3-node cluster holding ``--restart-gib`` of ``--body-bytes`` messages; one
  follower is stopped gracefully (SIGTERM) or killed (SIGKILL), then started again. The figure
  is process start -> caught up: health SERVING and its applied index equal to the leader's
  commit index. The node's own log lines split it: interpreter start-up (imports, settings),
  store open (CommitLog recovery, ConsumeQueue/IndexFile repair), Raft log open (index
  recovery), then replay (the committed entries it applies again) and the rest of the catch-up.
- ``catchup``: a follower stopped while ``--catchup-gib`` more is written, then started: the
  bytes it was behind (the leader's CommitLog growth) over the time from its process start to
  caught up. Then a fresh fourth node started with ``--join`` (it asks the cluster to add it
  as a learner) catches up the whole log: the same figure from an empty data directory.
- ``rss``: a 3-node cluster holding ``--stored-gib`` (bodies of ``--rss-body-bytes``, large so
  the fill is quick); each node's VmRSS (and VmHWM, the peak) from /proc/<pid>/status right
  after the fill, 3 s later (an idle node gives memory back: node/heap.py), after every node
  restarted, and after every queue was read from its first offset
  (fast Pull form) through the leader and through a follower.
- ``queues``: the typed ``Producer.send_async`` (idempotent, defaults), round robin over a
  topic of ``--queues`` queues against a topic of 1 queue, same body size, window and budget;
  interleaved rounds, medians and their ratio. Every queue gets one message first.

Every figure carries the 1-, 5- and 15-minute load average when it was taken: the machine is
shared and a figure under load says so.

Rules this module keeps:
- Every loop and wait is bounded in count and in time; a wait that runs out fails the run
  (BenchError), it never hangs.
- Servers listen on 127.0.0.1 only; only the node processes this bench started are signalled,
  by PID (``LocalCluster``).
- Data lives in a fresh temporary directory under ``--dir`` (default: the system's temporary
  directory), removed at the end whatever happens. Before filling, free space is checked: a
  size that does not fit (three replicas, with 25% to spare) is scaled down to what does and
  the figure is labelled as measured at that size.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import grpc

from raftlog.bench.cluster import (
    CHANNEL_OPTIONS,
    CONSUMER_STUB,
    PRODUCER_STUB,
    BenchError,
    build_request,
    produce_windowed,
    source_description,
)
from raftlog.bench.report import Budget, machine_description
from raftlog.bench.typed_client import typed_produce
from raftlog.client import Producer, RaftlogError
from raftlog.client.admin import Admin
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import LOG_FILE, ClusterError, LocalCluster, free_ports
from raftlog.testing.node_probes import alive, health

PARTS = ("restart", "catchup", "rss", "queues")
GIB = 1 << 30
MIB = 1 << 20
TOPIC = "scale"
TOPIC_QUEUES = 4
# A fill request carries about this many body bytes (at most 256 messages).
FILL_REQUEST_BYTES = 1 * MIB
FILL_WINDOW = 8
FILL_POOL = 16
# Replicas the disk must hold, and the spare space the size check keeps.
REPLICAS = 3
SPACE_MARGIN = 1.25
CLUSTER_START_TIMEOUT_S = 60.0
POLL_S = 0.02
PULL_MAX_MESSAGES = 1024
STATUS_TIMEOUT_S = 0.5
IDLE_RELEASE_S = 3.0
ADMIN_STUB: Any = client_pb2_grpc.AdminStub


@dataclass(slots=True)
class Figure:
    part: str
    name: str
    value: float
    unit: str
    # os.getloadavg() when the figure was taken.
    load: tuple[float, float, float]
    params: dict[str, object] = field(default_factory=dict)
    detail: dict[str, object] = field(default_factory=dict)


def load_average() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


def proc_memory_mib(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (the peak RSS) of ``pid`` in MiB, from /proc/<pid>/status."""
    found: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = round(int(value.split()[0]) / 1024, 1)
    return found


def commit_log_bytes(data_dir: str) -> int:
    """Bytes in a node's CommitLog segment files (they grow as written: no preallocation)."""
    directory = os.path.join(data_dir, "store", "commitlog")
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            if entry.is_file() and entry.name.isdigit():
                total += entry.stat().st_size
    return total


def status(address: str) -> Any:
    """The node's ClusterStatusResponse, or None when it does not answer within a moment."""
    with grpc.insecure_channel(address) as channel:
        try:
            return ADMIN_STUB(channel).ClusterStatus(
                client_pb2.ClusterStatusRequest(), timeout=STATUS_TIMEOUT_S
            )
        except grpc.RpcError:
            return None


def leader_commit(leader: str) -> int:
    answer = status(leader)
    if answer is None or answer.leader_address != leader:
        raise BenchError(f"{leader} no longer answers as the leader")
    return int(answer.commit_index)


def wait_applied(addresses: Sequence[str], leader: str, timeout_s: float) -> float:
    """Wait until every node in ``addresses`` applied the leader's commit index; seconds."""
    began = time.monotonic()
    for _ in range(int(timeout_s / POLL_S) + 1):
        commit = leader_commit(leader)
        answers = [status(a) for a in addresses]
        if all(a is not None and a.applied_index >= commit for a in answers):
            return time.monotonic() - began
        if time.monotonic() - began >= timeout_s:
            break
        time.sleep(POLL_S * 5)
    raise BenchError(f"not every node applied the leader's commit within {timeout_s:.0f} s")


def fill_batch(body_bytes: int) -> int:
    return max(1, min(256, FILL_REQUEST_BYTES // body_bytes))


def fill(leader: str, topic: str, total_bytes: int, body_bytes: int, max_seconds: float) -> int:
    """Produce ``total_bytes`` of bodies to ``topic`` (raw stub, batches of about 1 MiB, 8 in
    flight); returns the messages acknowledged. Fails if the time bound ends it first."""
    batch = fill_batch(body_bytes)
    wanted = max(batch, total_bytes // body_bytes)
    requests = [
        build_request(topic, body_bytes, batch, i * batch, TOPIC_QUEUES) for i in range(FILL_POOL)
    ]
    with grpc.insecure_channel(leader, options=CHANNEL_OPTIONS) as channel:
        acked, seconds = produce_windowed(
            PRODUCER_STUB(channel), requests, batch, FILL_WINDOW, Budget(wanted, max_seconds)
        )
    if acked < wanted:
        raise BenchError(
            f"the fill reached {acked * body_bytes / GIB:.2f} of "
            f"{total_bytes / GIB:.2f} GiB within {max_seconds:.0f} s"
        )
    print(
        f"  filled {acked * body_bytes / GIB:.2f} GiB in {seconds:.1f} s "
        f"({acked * body_bytes / MIB / seconds:.0f} MiB/s, load {load_average()[0]})",
        file=sys.stderr,
        flush=True,
    )
    return acked


def fitting_bytes(root: str, wanted_bytes: int) -> int:
    """``wanted_bytes`` per replica, or less so that three replicas fit in the free space of
    ``root`` with the margin (0 when nothing useful fits)."""
    free = shutil.disk_usage(root).free
    fits = int(free / (REPLICAS * SPACE_MARGIN))
    return min(wanted_bytes, fits)


@contextlib.contextmanager
def running_cluster(
    root: str, name: str, node_count: int = 3, extra_args: Sequence[str] = ()
) -> Iterator[tuple[LocalCluster, str]]:
    """A fresh cluster under ``root``/``name``, its leader; stopped and removed on the way out."""
    base_dir = tempfile.mkdtemp(prefix=f"{name}-", dir=root)
    cluster = LocalCluster(base_dir, node_count=node_count, base_port=0, extra_args=extra_args)
    try:
        cluster.start(CLUSTER_START_TIMEOUT_S)
        leader = cluster.leader_address()
        if leader is None:
            raise BenchError("the cluster elected no leader")
        yield cluster, leader
    finally:
        cluster.stop(timeout_s=20)
        shutil.rmtree(base_dir, ignore_errors=True)


# ---------------------------------------------------------------------------- node log


def _log_time(line: str) -> float | None:
    """The wall-clock time of a node log line (``%(asctime)s`` prefix), or None."""
    try:
        stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    except ValueError:
        return None
    return stamp.timestamp()


def _seconds_in(line: str, marker: str) -> float | None:
    """``12.345`` from ``... <marker> 12.345 s ...``."""
    at = line.find(marker)
    if at < 0:
        return None
    try:
        return float(line[at + len(marker) :].split()[0])
    except (IndexError, ValueError):
        return None


def start_phases(log_path: str, from_byte: int, started_at: float) -> dict[str, float]:
    """What the node's start-up log lines (written after ``from_byte``) say, in seconds from
    ``started_at`` (the bench's clock when it spawned the process): the end of each phase and
    the durations the lines report."""
    phases: dict[str, float] = {}
    with open(log_path, "rb") as handle:
        handle.seek(from_byte)
        lines = handle.read().decode(errors="replace").splitlines()
    for line in lines:
        at = _log_time(line)
        if at is None:
            continue
        since = round(at - started_at, 3)
        store_s = _seconds_in(line, "store opened in")
        if store_s is not None and "store_open_s" not in phases:
            phases["store_open_s"] = store_s
            phases["interpreter_and_settings_s"] = round(since - store_s, 3)
            phases["store_opened_at_s"] = since
        raft_s = _seconds_in(line, "raft log opened in")
        if raft_s is not None and "raft_log_open_s" not in phases:
            phases["raft_log_open_s"] = raft_s
        if " serving on " in line and "serving_logged_at_s" not in phases:
            phases["serving_logged_at_s"] = since
        if "replayed entries" in line and "replay_s" not in phases:
            # "replayed entries A..B in S s"
            span, _, rest = line.split("replayed entries ", 1)[1].partition(" in ")
            low, _, high = span.partition("..")
            with contextlib.suppress(ValueError):
                phases["replay_s"] = float(rest.split()[0])
                phases["replay_done_at_s"] = since
                phases["replay_entries"] = int(high) - int(low) + 1
    return phases


# ---------------------------------------------------------------------------- restart


def time_start(
    cluster: LocalCluster, node_id: str, leader: str, timeout_s: float
) -> dict[str, object]:
    """Start ``node_id`` (stopped) and time it to SERVING and to caught up (applied index ==
    the leader's commit index), with the phases its log reports."""
    node = cluster.nodes[node_id]
    log_path = os.path.join(node.data_dir, LOG_FILE)
    from_byte = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    commit = leader_commit(leader)
    started_wall = time.time()
    began = time.monotonic()
    cluster.start_node(node_id)
    serving_s: float | None = None
    caught_up_s: float | None = None
    for _ in range(int(timeout_s / POLL_S) + 1):
        elapsed = time.monotonic() - began
        if elapsed >= timeout_s:
            break
        if node.pid is None or not alive(node.pid):
            raise BenchError(f"{node_id} exited: {cluster.log_tail(node_id)}")
        if serving_s is None:
            if health(node.address, STATUS_TIMEOUT_S) == "SERVING":
                serving_s = time.monotonic() - began
            else:
                time.sleep(POLL_S)
                continue
        answer = status(node.address)
        if answer is not None and answer.applied_index >= commit:
            caught_up_s = time.monotonic() - began
            break
        time.sleep(POLL_S)
    if serving_s is None or caught_up_s is None:
        raise BenchError(f"{node_id} did not catch up within {timeout_s:.0f} s")
    return {
        "serving_s": round(serving_s, 3),
        "caught_up_s": round(caught_up_s, 3),
        "commit_index": commit,
        **start_phases(log_path, from_byte, started_wall),
    }


def _a_follower(cluster: LocalCluster, leader: str) -> str:
    return next(n for n, node in cluster.nodes.items() if node.address != leader)


def measure_restarts(
    cluster: LocalCluster, leader: str, rounds: int, stored_bytes: int, timeout_s: float
) -> list[Figure]:
    figures: list[Figure] = []
    for round_index in range(rounds):
        for how in ("graceful", "kill"):
            node_id = _a_follower(cluster, leader)
            if how == "graceful":
                cluster.stop_node(node_id, timeout_s=30)
            else:
                cluster.kill(node_id)
            timing = time_start(cluster, node_id, leader, timeout_s)
            figure = Figure(
                "restart",
                f"restart after {'SIGTERM' if how == 'graceful' else 'SIGKILL'}",
                float(str(timing["caught_up_s"])),
                "s",
                load_average(),
                {"round": round_index, "node": node_id, "stored_gib": stored_bytes / GIB},
                timing,
            )
            _progress(figure)
            figures.append(figure)
    return figures


# ---------------------------------------------------------------------------- catch-up


def measure_catch_up(
    cluster: LocalCluster,
    leader: str,
    catch_up_bytes: int,
    body_bytes: int,
    fill_seconds: float,
    timeout_s: float,
    join: bool,
) -> list[Figure]:
    figures: list[Figure] = []
    node_id = _a_follower(cluster, leader)
    leader_dir = next(n.data_dir for n in cluster.nodes.values() if n.address == leader)
    cluster.stop_node(node_id, timeout_s=30)
    behind_from = commit_log_bytes(cluster.nodes[node_id].data_dir)
    fill(leader, TOPIC, catch_up_bytes, body_bytes, fill_seconds)
    behind = commit_log_bytes(leader_dir) - behind_from
    timing = time_start(cluster, node_id, leader, timeout_s)
    seconds = float(str(timing["caught_up_s"]))
    figure = Figure(
        "catchup",
        "follower behind, restarted: MB/s to caught up",
        behind / 1e6 / seconds,
        "MB/s",
        load_average(),
        {"node": node_id, "behind_bytes": behind},
        timing,
    )
    _progress(figure)
    figures.append(figure)
    if join:
        figures.append(measure_join(cluster, leader, leader_dir, timeout_s))
    return figures


def measure_join(cluster: LocalCluster, leader: str, leader_dir: str, timeout_s: float) -> Figure:
    """A fresh fourth node started with ``--join``: seconds from process start until it
    applied the leader's commit index, and the leader's whole CommitLog over that time."""
    (port,) = free_ports(1, {n.port for n in cluster.nodes.values()}, with_peer=True)
    address = f"127.0.0.1:{port}"
    data_dir = os.path.join(cluster.base_dir, "n4")
    os.makedirs(data_dir)
    command = [
        sys.executable, "-m", "raftlog.cli", "node", "start", "--node-id", "n4",
        "--listen", address, "--data-dir", data_dir, "--join", ",".join(cluster.addresses),
        "--join-timeout-ms", "60000",
    ]  # fmt: skip
    total = commit_log_bytes(leader_dir)
    commit = leader_commit(leader)
    began = time.monotonic()
    with open(os.path.join(data_dir, LOG_FILE), "ab") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        caught_up_s: float | None = None
        for _ in range(int(timeout_s / (POLL_S * 5)) + 1):
            if process.poll() is not None:
                raise BenchError(f"the joining node exited with status {process.returncode}")
            answer = status(address)
            if answer is not None and answer.applied_index >= commit:
                caught_up_s = time.monotonic() - began
                break
            if time.monotonic() - began >= timeout_s:
                break
            time.sleep(POLL_S * 5)
        if caught_up_s is None:
            raise BenchError(f"the joining node did not catch up within {timeout_s:.0f} s")
        figure = Figure(
            "catchup",
            "new member (--join): MB/s to caught up",
            total / 1e6 / caught_up_s,
            "MB/s",
            load_average(),
            {"log_bytes": total},
            {"caught_up_s": round(caught_up_s, 3), "commit_index": commit},
        )
        _progress(figure)
        return figure
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


# ---------------------------------------------------------------------------- RSS


def node_memory(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    return {
        node_id: proc_memory_mib(node.pid)
        for node_id, node in cluster.nodes.items()
        if node.pid is not None
    }


def rss_figure(cluster: LocalCluster, when: str, stored_bytes: int, **params: object) -> Figure:
    memory = node_memory(cluster)
    figure = Figure(
        "rss",
        f"max node RSS {when}",
        max(m["VmRSS"] for m in memory.values()),
        "MiB",
        load_average(),
        {"stored_gib": round(stored_bytes / GIB, 2), **params},
        {"nodes": memory},
    )
    _progress(figure)
    return figure


def read_everything(address: str, topic: str, queues: int, max_seconds: float) -> int:
    """Pull every queue of ``topic`` from its first offset to its end (fast form) from
    ``address``; returns the record bytes read."""
    total = 0
    deadline = time.monotonic() + max_seconds
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = CONSUMER_STUB(channel)
        for queue_id in range(queues):
            offset = 0
            for _ in range(10_000_000):
                if time.monotonic() >= deadline:
                    raise BenchError(f"reading {topic} back took more than {max_seconds:.0f} s")
                response = stub.Pull(
                    client_pb2.PullRequest(
                        topic=topic,
                        queue_id=queue_id,
                        queue_offset=offset,
                        max_messages=PULL_MAX_MESSAGES,
                        return_records=True,
                        this_replica=True,
                    ),
                    timeout=30,
                )
                if response.status != client_pb2.PULL_STATUS_FOUND:
                    break
                total += len(response.records)
                offset = response.next_queue_offset
    return total


def measure_rss(
    root: str, stored_bytes: int, body_bytes: int, fill_seconds: float, timeout_s: float
) -> list[Figure]:
    figures: list[Figure] = []
    with running_cluster(root, "rss") as (cluster, leader):
        with Admin(cluster.addresses) as admin:
            admin.create_topic(TOPIC, TOPIC_QUEUES)
        figures.append(rss_figure(cluster, "idle, empty", 0))
        fill(leader, TOPIC, stored_bytes, body_bytes, fill_seconds)
        wait_applied(cluster.addresses, leader, timeout_s)
        figures.append(rss_figure(cluster, "after the fill", stored_bytes, body_bytes=body_bytes))
        # A node releases memory on its second housekeeping tick without a write (node/heap.py).
        time.sleep(IDLE_RELEASE_S)
        figures.append(
            rss_figure(
                cluster,
                f"{IDLE_RELEASE_S:.0f} s after the writes stopped",
                stored_bytes,
                body_bytes=body_bytes,
            )
        )
        cluster.stop(timeout_s=30)
        cluster.start(timeout_s)
        leader = cluster.leader_address() or ""
        wait_applied(cluster.addresses, leader, timeout_s)
        figures.append(
            rss_figure(cluster, "after every node restarted", stored_bytes, body_bytes=body_bytes)
        )
        follower = next(a for a in cluster.addresses if a != leader)
        for address in (leader, follower):
            began = time.monotonic()
            read = read_everything(address, TOPIC, TOPIC_QUEUES, fill_seconds)
            print(
                f"  read {read / GIB:.2f} GiB from {address} in {time.monotonic() - began:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        figures.append(
            rss_figure(
                cluster,
                "after reading every queue from its start (leader and a follower)",
                stored_bytes,
                body_bytes=body_bytes,
            )
        )
    return figures


# ---------------------------------------------------------------------------- queues


def measure_queues(
    root: str, queues: int, body_bytes: int, window: int, budget: Budget, rounds: int
) -> list[Figure]:
    topics = {1: "scale-q1", queues: f"scale-q{queues}"}
    args = ("--max-topic-queue-count", str(max(queues, 1024)))
    samples: dict[int, list[float]] = {n: [] for n in topics}
    figures: list[Figure] = []
    with running_cluster(root, "queues", extra_args=args) as (cluster, _leader):
        with Admin(cluster.addresses) as admin:
            for count, topic in topics.items():
                admin.create_topic(topic, count)
        with Producer(cluster.addresses) as producer:  # one message to every queue first
            futures = [
                producer.send_async(topic, b"w", queue_id=q)
                for count, topic in topics.items()
                for q in range(count)
            ]
            for future in futures:
                future.result(timeout=60)
        for round_index in range(rounds):
            order = list(topics) if round_index % 2 == 0 else list(reversed(topics))
            for count in order:
                acked, seconds = typed_produce(
                    cluster.addresses,
                    body_bytes,
                    window,
                    budget,
                    topic=topics[count],
                    queue_count=count,
                )
                rate = acked / seconds if seconds > 0 else 0.0
                samples[count].append(rate)
                print(
                    f"  round {round_index} {count} queue(s): {rate:,.0f} msgs/s "
                    f"(load {load_average()[0]})",
                    file=sys.stderr,
                    flush=True,
                )
    medians = {count: statistics.median(rates) for count, rates in samples.items()}
    for count in topics:
        figures.append(
            Figure(
                "queues",
                f"typed send_async, {count} queue(s)",
                medians[count],
                "msgs/s",
                load_average(),
                {"body_bytes": body_bytes, "window": window, "rounds": rounds},
                {"samples": [round(r) for r in samples[count]]},
            )
        )
    ratio = Figure(
        "queues",
        f"{queues} queues / 1 queue (typed client)",
        medians[queues] / medians[1] if medians[1] else 0.0,
        "ratio",
        load_average(),
        {"queues": queues, "body_bytes": body_bytes, "window": window, "rounds": rounds},
        {
            "per_round": [
                round(many / one, 3) if one else 0.0
                for one, many in zip(samples[1], samples[queues], strict=True)
            ]
        },
    )
    _progress(ratio)
    figures.append(ratio)
    return figures


# ---------------------------------------------------------------------------- main


def _progress(figure: Figure) -> None:
    load = "/".join(f"{x:.2f}" for x in figure.load)
    print(
        f"  {figure.part}: {figure.name}: {figure.value:,.3f} {figure.unit} (load {load})",
        file=sys.stderr,
        flush=True,
    )


def render(figures: Sequence[Figure]) -> str:
    lines = ["| part | figure | value | unit | load 1/5/15 min |", "|---|---|---|---|---|"]
    for f in figures:
        load = " / ".join(f"{x:.2f}" for x in f.load)
        value = f"{f.value:,.3f}" if f.unit in ("s", "ratio") else f"{f.value:,.1f}"
        lines.append(f"| {f.part} | {f.name} | {value} | {f.unit} | {load} |")
    return "\n".join(lines)


def run_restart_and_catchup(args: argparse.Namespace, root: str, parts: set[str]) -> list[Figure]:
    figures: list[Figure] = []
    restart_bytes = fitting_bytes(root, int(args.restart_gib * GIB))
    if restart_bytes < int(args.restart_gib * GIB):
        print(f"  only {restart_bytes / GIB:.2f} GiB fits: restart measured at that size")
    with running_cluster(root, "restart") as (cluster, leader):
        with Admin(cluster.addresses) as admin:
            admin.create_topic(TOPIC, TOPIC_QUEUES)
        fill(leader, TOPIC, restart_bytes, args.body_bytes, args.fill_seconds)
        wait_applied(cluster.addresses, leader, args.timeout)
        figures.append(
            rss_figure(cluster, "after the fill", restart_bytes, body_bytes=args.body_bytes)
        )
        if "restart" in parts:
            figures += measure_restarts(
                cluster, leader, args.restart_rounds, restart_bytes, args.timeout
            )
        if "catchup" in parts:
            catch_up_bytes = fitting_bytes(root, int(args.catchup_gib * GIB))
            figures += measure_catch_up(
                cluster,
                leader,
                catch_up_bytes,
                args.body_bytes,
                args.fill_seconds,
                args.timeout,
                not args.no_join,
            )
    return figures


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raftlog bench scale", description=__doc__)
    parser.add_argument("--only", nargs="+", choices=PARTS, help="run only these parts")
    parser.add_argument("--restart-gib", type=float, default=1.0, help="held for restart")
    parser.add_argument("--catchup-gib", type=float, default=1.0, help="written while down")
    parser.add_argument("--stored-gib", type=float, default=10.0, help="held for the RSS part")
    parser.add_argument("--queues", type=int, default=10_000, help="queues of the many-queue topic")
    parser.add_argument("--body-bytes", type=int, default=1024, help="restart/catch-up bodies")
    parser.add_argument("--rss-body-bytes", type=int, default=64 * 1024, help="RSS part bodies")
    parser.add_argument("--queue-body-bytes", type=int, default=100, help="queues part bodies")
    parser.add_argument("--window", type=int, default=1024, help="typed sends outstanding")
    parser.add_argument("--restart-rounds", type=int, default=2)
    parser.add_argument("--queue-rounds", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=5.0, help="per queues measurement")
    parser.add_argument("--max-messages", type=int, default=200_000, help="per queues measurement")
    parser.add_argument("--fill-seconds", type=float, default=900.0, help="bound on each fill")
    parser.add_argument("--timeout", type=float, default=300.0, help="bound on each wait")
    parser.add_argument("--no-join", action="store_true", help="skip the --join member")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where data goes (a temp dir)")
    parser.add_argument("--json", metavar="PATH", help="write every figure as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    sizes = (args.restart_gib, args.catchup_gib, args.stored_gib, args.max_seconds)
    if min(sizes) <= 0 or min(args.queues, args.body_bytes, args.window, args.max_messages) < 1:
        parser.error("sizes, counts and --max-seconds must be positive")
    parts = set(args.only or PARTS)
    os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="raftlog-scale-", dir=args.dir)
    source = source_description()
    figures: list[Figure] = []
    failures: list[str] = []

    def run(name: str, part: Callable[[], list[Figure]]) -> None:
        """One part; a failed part is reported and the others still run."""
        try:
            figures.extend(part())
        except (BenchError, ClusterError, RaftlogError, grpc.RpcError, OSError) as error:
            failures.append(f"{name}: {error!r}")
            print(f"  {name} failed: {error!r}", file=sys.stderr, flush=True)

    try:
        if parts & {"restart", "catchup"}:
            run("restart/catchup", lambda: run_restart_and_catchup(args, root, parts))
        if "rss" in parts:
            stored = fitting_bytes(root, int(args.stored_gib * GIB))
            if stored < int(args.stored_gib * GIB):
                print(f"  only {stored / GIB:.2f} GiB fits: RSS measured at that size")
            run(
                "rss",
                lambda: measure_rss(
                    root, stored, args.rss_body_bytes, args.fill_seconds, args.timeout
                ),
            )
        if "queues" in parts:
            run(
                "queues",
                lambda: measure_queues(
                    root,
                    args.queues,
                    args.queue_body_bytes,
                    args.window,
                    Budget(args.max_messages, args.max_seconds),
                    args.queue_rounds,
                ),
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(render(figures))
    for failure in failures:
        print(f"FAILED {failure}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(
                {
                    "bench": "scale",
                    "machine": machine_description(),
                    "arguments": vars(args),
                    "source": source,
                    "figures": [asdict(f) for f in figures],
                    "failures": failures,
                },
                out,
                indent=2,
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
