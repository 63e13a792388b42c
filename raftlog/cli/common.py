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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the client is imported lazily: `raftlog --help` stays fast
    from raftlog.client import ClientTls, Connection

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


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """``--servers``, ``--timeout-s`` and the TLS flags: how a client command reaches the
    cluster (connect() reads them)."""
    parser.add_argument(
        "--servers",
        help="host:port,... (default: ./data/cluster.json, else 127.0.0.1:7701,7702,7703)",
    )
    parser.add_argument(
        "--timeout-s", type=float, default=15.0, help="seconds an operation may take"
    )
    add_tls_flags(parser)


def add_tls_flags(parser: argparse.ArgumentParser) -> None:
    """``--tls-ca``, ``--tls-cert``, ``--tls-key`` (client_tls() reads them)."""
    tls = parser.add_argument_group(
        "TLS", "all three unset: RAFTLOG_TLS_CA, RAFTLOG_TLS_CERT, RAFTLOG_TLS_KEY; none: plain"
    )
    tls.add_argument("--tls-ca", metavar="PEM", help="the CA that signed the nodes' certificates")
    tls.add_argument("--tls-cert", metavar="PEM", help="this client's certificate (mTLS)")
    tls.add_argument("--tls-key", metavar="PEM", help="this client's private key (mTLS)")
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help="a file holding this client's bearer token (default: RAFTLOG_TOKEN; never the "
        "token itself on the command line)",
    )


def client_token(args: argparse.Namespace) -> str | None:
    """The bearer token of ``--token-file``, else of RAFTLOG_TOKEN; None for none."""
    from raftlog.client.bearer_token import token_from_env

    path = getattr(args, "token_file", None)
    if path is None:
        return token_from_env()
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--token-file: cannot read {path}: {error}") from None
    if not token or any(c.isspace() for c in token):
        raise UsageError(f"--token-file: {path} holds no token (one line, no spaces)")
    return token


def client_tls(args: argparse.Namespace) -> ClientTls | None:
    """The TLS settings of ``--tls-*``; when none is given, of the RAFTLOG_TLS_* environment
    (the two are not mixed: a half from each would be hard to see); None for plain TCP."""
    from raftlog.client import ClientTls

    ca, cert, key = args.tls_ca, args.tls_cert, args.tls_key
    try:
        if ca is None and cert is None and key is None:
            return ClientTls.from_env()
        if ca is None:
            raise UsageError("--tls-cert and --tls-key need --tls-ca (the nodes' CA)")
        return ClientTls(ca, cert, key)
    except ValueError as error:
        raise UsageError(str(error)) from None


def connect(args: argparse.Namespace) -> Connection:
    """A Connection to ``--servers`` with the TLS settings of client_tls(); the caller closes
    it (the Admin, Producer or Consumer made on it does not)."""
    from raftlog.client import Connection, parse_addresses

    if args.timeout_s <= 0:
        raise UsageError("--timeout-s must be positive")
    try:
        servers = parse_addresses(args.servers or default_servers())
    except ValueError as error:
        raise UsageError(f"--servers: {error}") from None
    return Connection(servers, tls=client_tls(args), token=client_token(args))


def unreachable_hint(args: argparse.Namespace, error: BaseException) -> str:
    """What to check when a client command reached no member: its TLS settings, when it has
    them. A TLS mismatch shows only as "Socket closed", which names no cause."""
    from raftlog.client.errors import UnavailableError

    if not isinstance(error, UnavailableError) or not hasattr(args, "tls_ca"):
        return ""
    tls = client_tls(args)
    if tls is None:
        return (
            " (a cluster serving TLS needs --tls-ca, and --tls-cert/--tls-key when it asks "
            "for client certificates; or RAFTLOG_TLS_CA/CERT/KEY)"
        )
    if tls.cert_file is None:
        return " (a cluster asking for client certificates needs --tls-cert and --tls-key)"
    return " (check that --tls-ca signed the nodes' certificates and the node trusts the client's)"


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
