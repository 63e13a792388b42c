"""The `raftlog` command line: one entry point that dispatches to subcommands.

Rules: every subcommand imports its implementation lazily (start-up stays fast), prints
readable errors to stderr and exits non-zero on failure; no traceback for operating errors.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raftlog", description=__doc__)
    parser.add_subparsers(dest="command", required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
