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

``--modes`` adds raftlog's master-slave modes (``sync-master``, ``async-master``: a master and
two slaves, static roles) beside Raft mode on workloads 1-3, as their own columns with
targets relative to Raft mode (a master-slave group's failover needs its controller: the
chaos soak measures it, docs/replication.md).

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
import functools
import importlib.metadata
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict

from raftlog.bench.cluster import (
    source_description,
)
from raftlog.bench.compare_rounds import (
    QUEUE_COUNTS,
    QUICK_QUEUE_COUNTS,
    RETRIED_ERRORS,
    Plan,
    Recorder,
    Round,
    nats_round,
    queue_round,
    raftlog_round,
    raftlog_system,
)
from raftlog.bench.figures import (
    evaluate_targets,
    render_table,
    render_targets,
    summarise,
)
from raftlog.bench.modes import MODES
from raftlog.bench.nats_install import NatsBinary, NatsUnavailable, best_nats, system_nats
from raftlog.bench.report import Budget, write_json_report

SYSTEMS = ("raftlog", "nats")
DURABILITY_MODES = ("fsync", "write")


# (batch, window): raftlog's best-throughput region in bench/cluster.py's sweep.
def nats_sync_label(binary: NatsBinary, durability: str) -> str:
    if durability == "fsync" and binary.has_sync_interval:
        return f"nats-server {binary.version}, sync_interval: always"
    return f"nats-server {binary.version}, default sync"


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
    modes: Sequence[str] = ("raft",),
) -> None:
    """Interleaved rounds of every (pairing, system, raftlog mode), then raftlog's queue
    scaling."""
    turns = [(s, m) for s in systems for m in (modes if s == "raftlog" else ("",))]
    for round_index in range(plan.rounds):
        order = turns if round_index % 2 == 0 else list(reversed(turns))
        for durability in durabilities:
            # Failover does not depend on durability: measured once, in the first pairing.
            failover = durability == durabilities[0]
            turn = Round(durability, plan, root, round_index, recorder, failover)
            for system, mode in order:
                name = raftlog_system(mode) if system == "raftlog" else system
                what = f"round {round_index} {name} / {durability}"
                print(f"[{what}]", file=sys.stderr)
                if system == "raftlog":
                    recorder.attempt(what, functools.partial(raftlog_round, turn, mode))
                else:
                    assert binary is not None
                    recorder.attempt(what, functools.partial(nats_round, binary, turn))
    if "raftlog" in systems and plan.queue_counts:
        print("[queues] raftlog / fsync", file=sys.stderr)
        recorder.attempt("queues", functools.partial(queue_round, plan, root, recorder))


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


def _parser() -> argparse.ArgumentParser:
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
        "--modes",
        default="raft",
        help=f"raftlog's replication modes, comma-separated: {', '.join(MODES)} (default raft)",
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.max_seconds <= 0 or args.failover_runs < 0:
        parser.error("--rounds and --max-seconds must be positive, --failover-runs >= 0")
    modes = tuple(dict.fromkeys(m.strip() for m in args.modes.split(",") if m.strip()))
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes takes {', '.join(MODES)}")
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
        run(plan, systems, durabilities, binary, root, recorder, modes)
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
