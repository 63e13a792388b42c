"""The `raftlog` command line: one entry point that dispatches to subcommands.

Rules: every subcommand imports its implementation lazily (start-up stays fast), prints
readable errors to stderr and exits non-zero on failure (2 usage/configuration, 1 operation
failed, 3 unknown outcome; see common.py); no traceback for operating errors. One module per
command group: node.py (node start), health.py (node health), cluster.py (cluster
up/down/status), member.py (member list/add/remove/promote), acl.py (acl grant/revoke/list:
access rules), dlq.py (dlq list/show/resend: dead letters), transaction.py (transaction
list/commit/rollback: undecided transactions), client.py (topic, produce, consume, query,
leader), certs.py (certs init/issue: a development CA), chaos.py (chaos run,
chaos check), testing.py (testing sweep: what dead test runs left in Docker), pipeline.py
(pipeline <job>: the Spark jobs) and demo.py (the single-node store demonstration).
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from raftlog.cli import acl as cli_acl
    from raftlog.cli import certs as cli_certs
    from raftlog.cli import chaos as cli_chaos
    from raftlog.cli import client as cli_client
    from raftlog.cli import cluster as cli_cluster
    from raftlog.cli import controller as cli_controller
    from raftlog.cli import dlq as cli_dlq
    from raftlog.cli import health as cli_health
    from raftlog.cli import member as cli_member
    from raftlog.cli import node as cli_node
    from raftlog.cli import pipeline as cli_pipeline
    from raftlog.cli import testing as cli_testing
    from raftlog.cli import transaction as cli_transaction

    parser = argparse.ArgumentParser(
        prog="raftlog", description="raftlog: a Raft-replicated distributed commit log"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="demonstrate the store on embedded defaults")
    demo.add_argument("--data-dir", default="./data", help="where data lives (default ./data)")
    bench = commands.add_parser(
        "bench", help="run a benchmark (remaining arguments go to it; try --help)"
    )
    bench.add_argument(
        "target",
        choices=("store", "raft", "cluster", "compare", "modes", "pipeline", "scale"),
    )
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    cli_node.add_parser(commands)
    cli_health.add_parser(commands)
    cli_cluster.add_parser(commands)
    cli_member.add_parser(commands)
    cli_acl.add_parser(commands)
    cli_dlq.add_parser(commands)
    cli_transaction.add_parser(commands)
    cli_client.add_parsers(commands)
    cli_certs.add_parser(commands)
    cli_chaos.add_parser(commands)
    cli_controller.add_parser(commands)
    cli_testing.add_parser(commands)
    cli_pipeline.add_parser(commands)
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from raftlog.cli.demo import run_store_demo

        run_store_demo(args.data_dir)
        return 0
    if args.command == "bench":
        if args.target == "store":
            from raftlog.bench import store as bench_store

            return bench_store.main(args.bench_args)
        if args.target == "cluster":
            from raftlog.bench import cluster as bench_cluster

            return bench_cluster.main(args.bench_args)
        if args.target == "compare":
            from raftlog.bench import compare as bench_compare

            return bench_compare.main(args.bench_args)
        if args.target == "modes":
            from raftlog.bench import modes as bench_modes

            return bench_modes.main(args.bench_args)
        if args.target == "pipeline":
            from raftlog.bench import pipeline as bench_pipeline

            return bench_pipeline.main(args.bench_args)
        if args.target == "scale":
            from raftlog.bench import scale as bench_scale

            return bench_scale.main(args.bench_args)
        from raftlog.bench import raft as bench_raft

        return bench_raft.main(args.bench_args)
    if getattr(args, "handler", None) is not None:  # raftlog node health (health.py)
        return int(args.handler(args))
    if args.command == "node":
        from raftlog.cli import node as cli_node

        return cli_node.run(args)
    if args.command == "cluster":
        from raftlog.cli import cluster as cli_cluster

        return cli_cluster.run(args)
    if args.command == "member":
        from raftlog.cli import member as cli_member

        return cli_member.run(args)
    if args.command == "controller":
        from raftlog.cli import controller as cli_controller

        return cli_controller.run(args)
    from raftlog.cli import client as cli_client

    return cli_client.run(args)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_request:
        # argparse already printed the usage error (status 2) or the help (status 0).
        return exit_request.code if isinstance(exit_request.code, int) else 2
    from raftlog.cli.common import EXIT_INTERRUPTED, classify, unreachable_hint

    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("raftlog: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        verdict = classify(error)
        if verdict is None:
            raise
        code, message = verdict
        print(f"raftlog: {message}{unreachable_hint(args, error)}", file=sys.stderr)
        return code
