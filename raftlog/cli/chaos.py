"""`raftlog chaos run|check`: a chaos run against a fresh cluster (raftlog.chaos.runner), and
a re-check of a run's stored history and replicas.

Rules this module keeps: exit 0 when the run is valid, 1 on any anomaly (or when the run
could not be fully checked), 2 for usage errors and for a target that cannot be set up (no
Docker, no image); the report is printed whatever the verdict; a run's data directory is
named when the run starts and its fate (kept or removed, and its size) is the last line; the
heavy modules are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from raftlog.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_replication_flags, master_role

TARGETS = ("local", "containers")
_DURATION_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration_s(text: str) -> float:
    """``"60s"``, ``"5m"``, ``"1.5h"``, ``"250ms"`` or plain seconds (``"60"``), in seconds."""
    raw = text.strip().lower()
    for unit in sorted(_DURATION_UNITS_S, key=len, reverse=True):
        if raw.endswith(unit) and raw[: -len(unit)].replace(".", "", 1).isdigit():
            return float(raw[: -len(unit)]) * _DURATION_UNITS_S[unit]
    if raw.replace(".", "", 1).isdigit():
        return float(raw)
    raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 60s, 5m, 300)")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `chaos run` and `chaos check`."""
    chaos = commands.add_parser("chaos", help="chaos runs: faults + workload + checker")
    actions = chaos.add_subparsers(dest="chaos_command", required=True)
    run = actions.add_parser(
        "run",
        help="run a workload against a fresh cluster while injecting faults, then check",
        description="Starts a fresh cluster, runs producers and consumer groups while a "
        "seeded nemesis injects faults, heals, reads every replica and checks the history. "
        "Exit 0: valid; 1: anomalies; 2: usage. See docs/chaos.md.",
    )
    run.add_argument("--target", choices=TARGETS, default="local", help="default local")
    run.add_argument(
        "--duration", type=parse_duration_s, default=60.0, help="e.g. 60s, 5m (default 60s)"
    )
    run.add_argument(
        "--faults",
        default="kill,pause",
        help="comma-separated: kill, pause, freeze, rolling-restart, partition, controller, "
        "clients, latency (default kill,pause)",
    )
    run.add_argument("--seed", type=int, default=1, help="the nemesis seed (default 1)")
    run.add_argument("--json", type=Path, help="write the report and schedule here as JSON")
    _add_data_flags(run)
    run.add_argument(
        "--image",
        default="raftlog:dev",
        help="the node image for --target containers (default raftlog:dev; make image)",
    )
    run.add_argument("--nodes", type=int, default=3, help="node count (default 3)")
    run.add_argument("--durability", choices=("fsync", "write"), default="fsync")
    add_replication_flags(run)
    run.add_argument("--producers", type=int, default=3, help="producer threads (default 3)")
    run.add_argument("--groups", type=int, default=2, help="consumer groups (default 2)")
    run.add_argument(
        "--messaging",
        action="store_true",
        help="also delayed, ordered, transactional and reconsume-later traffic (Raft, local)",
    )
    _add_png_flag(run)
    run.set_defaults(handler=_run)
    _add_check(actions)
    summarize = actions.add_parser(
        "summarize", help="one table for many runs' --json files (valid, anomalies, failover)"
    )
    summarize.add_argument("files", type=Path, nargs="+", help="the runs' --json files")
    summarize.set_defaults(handler=_summarize)


def _add_check(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `chaos check`."""
    check = actions.add_parser("check", help="check a stored history and replicas again")
    check.add_argument("history", type=Path, help="history.jsonl of a run")
    check.add_argument("replicas", type=Path, help="replicas.jsonl of the same run")
    check.add_argument(
        "--async-master",
        action="store_true",
        help="the run was an ASYNC_MASTER group's: count acknowledged writes a failover took "
        "back (with their windows) instead of reporting them as anomalies",
    )
    check.add_argument("--json", type=Path, help="write the report here as JSON")
    check.add_argument(
        "--messaging-history",
        type=Path,
        help="a --messaging run's messaging-history.jsonl: check it too (delay, transactions, "
        "order per sharding key, reconsume later)",
    )
    _add_png_flag(check)
    check.set_defaults(handler=_check)


def _add_png_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--png",
        type=Path,
        help="write a PNG timeline here: acknowledged sends/s, faults, leader changes (matplotlib)",
    )


def _add_data_flags(run: argparse.ArgumentParser) -> None:
    """``--data-dir`` and ``--keep-data``: where a run's files go, and whether they stay."""
    run.add_argument(
        "--data-dir",
        type=Path,
        help="an empty directory for the run, always kept (default: a new temp dir, removed "
        "after a valid run unless --keep-data)",
    )
    run.add_argument(
        "--keep-data",
        action="store_true",
        help="keep the temp directory after a valid run too (an invalid run's is always kept)",
    )


def _require_matplotlib(png: Path | None) -> None:
    """Refuse --png before a run when the timeline could not be drawn after it."""
    if png is not None and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--png needs matplotlib: install raftlog with its bench extra (README)")


def _write_timeline(history: Path, png: Path | None, title: str) -> None:
    if png is None:
        return
    from raftlog.chaos.history import read_history
    from raftlog.chaos.timeline import timeline_of, write_png

    write_png(timeline_of(read_history(history)), png, title)
    print(f"timeline: {png}")


def _run(args: argparse.Namespace) -> int:
    from raftlog.chaos.messaging_workload import MessagingConfig
    from raftlog.chaos.nemesis import LINK_KINDS, fault_kinds
    from raftlog.chaos.runner import RunConfig, RunError, run, settle_data, write_json
    from raftlog.chaos.workload import WorkloadConfig

    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    try:
        kinds = fault_kinds(faults)
    except ValueError as error:
        raise UsageError(f"--faults: {error}") from None
    if args.nodes < 1 or args.producers < 1 or args.groups < 0:
        raise UsageError("--nodes and --producers must be at least 1, --groups at least 0")
    _require_matplotlib(args.png)
    config = RunConfig(
        duration_s=args.duration,
        faults=faults,
        seed=args.seed,
        data_dir=args.data_dir,
        nodes=args.nodes,
        durability=args.durability,
        replication=args.replication,
        master_role=master_role(args),
        static=args.static,
        partitions=any(k in LINK_KINDS for k in kinds),
        target=args.target,
        image=args.image,
        workload=WorkloadConfig(producers=args.producers, groups=args.groups, seed=args.seed),
        messaging=MessagingConfig() if args.messaging else None,
    )
    try:
        result = run(config, out=lambda line: print(line, flush=True))
    except RunError as error:
        raise UsageError(str(error)) from None
    print(result.render())
    if args.json is not None:
        write_json(result, args.json)
        print(f"json: {args.json}")
    verdict = "valid" if result.valid else "INVALID"
    title = f"chaos run, seed {args.seed}, {args.target}, faults {args.faults}: {verdict}"
    _write_timeline(result.history_path, args.png, title)
    print(settle_data(result, keep=args.keep_data))
    return EXIT_OK if result.valid else EXIT_FAILED


def _check(args: argparse.Namespace) -> int:
    from raftlog.chaos.checker import check
    from raftlog.chaos.history import loads_replicas, read_history

    _require_matplotlib(args.png)
    report = check(
        read_history(args.history),
        loads_replicas(args.replicas.read_text(encoding="utf-8")),
        acknowledged_loss_allowed=args.async_master,
    )
    print(report.render())
    valid = report.valid
    if args.messaging_history is not None:
        from raftlog.chaos.messaging_check import check_messaging, loads_messaging

        text = args.messaging_history.read_text(encoding="utf-8")
        messaging_report = check_messaging(loads_messaging(text))
        print(messaging_report.render())
        valid = valid and messaging_report.valid
    if args.json is not None:
        args.json.write_text(report.to_json(), encoding="utf-8")
    verdict = "valid" if valid else "INVALID"
    _write_timeline(args.history, args.png, f"chaos check of {args.history}: {verdict}")
    return EXIT_OK if valid else EXIT_FAILED


def _summarize(args: argparse.Namespace) -> int:
    from raftlog.chaos.soak_report import render, summarize_run

    try:
        summaries = [summarize_run(path) for path in args.files]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"not a chaos run's --json file: {error}") from None
    print(render(summaries))
    return EXIT_OK if all(s.valid for s in summaries) else EXIT_FAILED
