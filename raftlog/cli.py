"""The `raftlog` command line: one entry point that dispatches to subcommands.

Rules: every subcommand imports its implementation lazily (start-up stays fast), prints
readable errors to stderr and exits non-zero on failure; no traceback for operating errors.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raftlog", description="raftlog: a Raft-replicated distributed commit log"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="demonstrate the store on embedded defaults")
    demo.add_argument("--data-dir", default="./data", help="where data lives (default ./data)")
    bench = commands.add_parser(
        "bench", help="run a benchmark (remaining arguments go to it; try --help)"
    )
    bench.add_argument("target", choices=("store", "raft"))
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from raftlog.store.errors import StoreError

    try:
        if args.command == "demo":
            from raftlog.demo import run_store_demo

            run_store_demo(args.data_dir)
            return 0
        if args.target == "store":
            from raftlog.bench import store as bench_store

            return bench_store.main(args.bench_args)
        from raftlog.bench import raft as bench_raft

        return bench_raft.main(args.bench_args)
    except StoreError as error:
        print(f"raftlog: {type(error).__name__}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
