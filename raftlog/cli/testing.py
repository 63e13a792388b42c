"""`raftlog testing sweep`: remove the containers, networks and volumes that test runs
(``raftlog.testing.RaftlogCluster``, chaos runs on containers) left in Docker when their
process died before it could clean up (a killed pytest, a Ctrl-C'd chaos run).

Rules this module keeps: only objects labelled ``raftlog.test.run`` are looked at, and only
runs whose owning process on this host is gone are removed (raftlog.testing.docker_objects
decides); runs of live processes and of other hosts are listed as left alone; every object
removed is named; ``--dry-run`` removes nothing. Exit 0 when the sweep is done (also when
there was nothing to remove), 1 when Docker does not answer or testcontainers is missing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from raftlog.cli.common import EXIT_FAILED, EXIT_OK


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `testing sweep`."""
    testing = commands.add_parser("testing", help="the Docker objects of raftlog.testing runs")
    actions = testing.add_subparsers(dest="testing_command", required=True)
    sweep = actions.add_parser(
        "sweep",
        help="remove what dead test runs left in Docker (containers, networks, volumes)",
        description="Removes every container, network and volume labelled raftlog.test.run "
        "whose owning process (label raftlog.test.owner, host:pid) on this host is gone. "
        "Live runs, other hosts' runs and unlabelled Docker objects are never touched.",
    )
    sweep.add_argument(
        "--run",
        dest="run_ids",
        action="append",
        metavar="RUN_ID",
        help="only this run (repeatable; the id is the raftlog.test.run label)",
    )
    sweep.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    sweep.set_defaults(handler=_sweep)


def _sweep(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    try:
        from raftlog.testing import docker_objects
    except ImportError as error:
        print(
            f"raftlog: testing sweep needs testcontainers (the testing extra): {error}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    reason = docker_objects.docker_available()
    if reason is not None:
        print(f"raftlog: {reason}", file=sys.stderr)
        return EXIT_FAILED
    wanted = set(args.run_ids) if args.run_ids else None
    runs = [r for r in docker_objects.labelled_runs() if wanted is None or r.run_id in wanted]
    stale = [r for r in runs if r.stale]
    if not args.dry_run:
        stale = docker_objects.sweep_stale([r.run_id for r in stale])
    verb = "would remove" if args.dry_run else "removed"
    for run in stale:
        out(f"{verb} run {run.run_id} (owner {run.owner}, gone): {', '.join(run.objects)}")
    for run in runs:
        if not run.stale:
            out(f"left alone: run {run.run_id} (owner {run.owner}, {run.owner_state})")
    if not stale:
        out("nothing to remove: no test run of a dead process left anything in Docker")
    return EXIT_OK
