"""What every `raftlog` subcommand shares: exit codes, the usage error, where the servers are,
and turning an operating error into one readable line.

Rules this module keeps: exit status 2 for usage and configuration errors, 1 for a failed
operation, 3 for an unknown outcome (a write that may or may not be stored); no traceback for
operating errors. Heavy packages (grpc, the client) are imported lazily.
"""

from __future__ import annotations

import argparse
import json
import os

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNKNOWN_OUTCOME = 3
EXIT_INTERRUPTED = 130
DEFAULT_DATA_DIR = "./data"
DEFAULT_SERVERS = "127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703"


class UsageError(Exception):
    """A command-line argument is wrong (exit status 2)."""


def default_servers(data_dir: str = DEFAULT_DATA_DIR) -> str:
    """The addresses in ``<data_dir>/cluster.json`` (a local cluster), else the defaults."""
    try:
        with open(os.path.join(data_dir, "cluster.json")) as handle:
            nodes = json.load(handle)["nodes"]
        return ",".join(f"127.0.0.1:{int(node['port'])}" for node in nodes) or DEFAULT_SERVERS
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_SERVERS


def classify(error: BaseException) -> tuple[int, str] | None:
    """The exit status and one-line message for an operating error, or None for a bug."""
    from raftlog.client.errors import RaftlogError, UnknownOutcomeError
    from raftlog.controller.client import ControllerRefused, ControllerUnavailable
    from raftlog.node.config import ConfigError
    from raftlog.store.errors import StoreError
    from raftlog.testing.local_cluster import ClusterError

    if isinstance(error, UsageError | ConfigError):
        return EXIT_USAGE, str(error)
    if isinstance(error, StoreError):
        return EXIT_USAGE, f"{type(error).__name__}: {error}"
    if isinstance(error, UnknownOutcomeError):
        return EXIT_UNKNOWN_OUTCOME, f"unknown outcome (it may or may not be stored): {error}"
    if isinstance(error, RaftlogError):
        return EXIT_FAILED, f"{type(error).__name__}: {error}"
    if isinstance(error, ClusterError | ControllerUnavailable | ControllerRefused):
        return EXIT_FAILED, str(error)
    if isinstance(error, OSError):
        return EXIT_FAILED, f"{error.strerror or error}: {error.filename or ''}".rstrip(": ")
    return None


def add_replication_flags(parser: argparse.ArgumentParser) -> None:
    """``--replication``, ``--static`` and ``--role``: the replication mode of a local group
    (`cluster up`, `chaos run`)."""
    parser.add_argument(
        "--replication",
        choices=("raft", "master-slave"),
        default="raft",
        help="raft (default), or master-slave: a master and slaves, elected by three "
        "controller processes (or n1 for good with --static)",
    )
    parser.add_argument(
        "--static",
        action="store_true",
        help="master-slave without a controller: n1 stays the master (no failover)",
    )
    parser.add_argument(
        "--role",
        choices=("sync", "async"),
        default="sync",
        help="master-slave only: SYNC_MASTER (default) or ASYNC_MASTER",
    )


def master_role(args: argparse.Namespace) -> str:
    """The master role ``--role`` names."""
    return "SYNC_MASTER" if args.role == "sync" else "ASYNC_MASTER"
