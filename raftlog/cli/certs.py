"""`raftlog certs init|issue`: a development CA, and certificates for nodes and clients
(docs/security.md, "Turning on TLS").

`certs init --dir DIR` writes ``DIR/ca.pem`` and ``DIR/ca.key``. `certs issue --dir DIR --node
ID` writes ``DIR/ID.pem`` and ``DIR/ID.key``: the node id is the common name and a DNS
alternative name (what peers check on the peer port), plus each ``--host`` (default: localhost
and 127.0.0.1), the names clients dial. `certs issue --client NAME` writes a client's pair.

Rules this module keeps: the certificates are made by raftlog.testing.dev_ca (one
implementation for the CLI, LocalCluster and tests); private keys are written 0600; an
existing file is never replaced without ``--force`` (exit 1, nothing written); a bad name or a
missing CA is a usage error (exit 2); every error is one line on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

from raftlog.cli.common import EXIT_OK, UsageError

_DEFAULT_CA_VALID_DAYS = 3650
_DEFAULT_VALID_DAYS = 365


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `certs init|issue`."""
    certs = commands.add_parser("certs", help="a development CA and TLS certificates")
    actions = certs.add_subparsers(dest="certs_command", required=True)
    init = actions.add_parser(
        "init",
        help="make a development CA (DIR/ca.pem, DIR/ca.key)",
        description="Makes a certificate authority for development and tests. In production, "
        "issue the certificates from your own CA (docs/security.md).",
    )
    _common_flags(init, _DEFAULT_CA_VALID_DAYS)
    init.set_defaults(handler=_init)

    issue = actions.add_parser(
        "issue", help="issue a node's or a client's certificate, signed by DIR's CA"
    )
    _common_flags(issue, _DEFAULT_VALID_DAYS)
    who = issue.add_mutually_exclusive_group(required=True)
    who.add_argument("--node", metavar="ID", help="a node id: its common name and DNS name")
    who.add_argument("--client", metavar="NAME", help="a client's name: its common name")
    issue.add_argument(
        "--host",
        action="append",
        metavar="HOST",
        help="--node only: a host name or IP clients dial it by (repeatable; "
        "default: localhost and 127.0.0.1)",
    )
    issue.set_defaults(handler=_issue)


def _common_flags(parser: argparse.ArgumentParser, valid_days: int) -> None:
    parser.add_argument("--dir", required=True, help="the CA's directory")
    parser.add_argument(
        "--valid-days",
        type=int,
        default=valid_days,
        help=f"how long the certificate is valid (default {valid_days} days)",
    )
    parser.add_argument("--force", action="store_true", help="replace existing files")


def _check_valid_days(args: argparse.Namespace) -> None:
    if args.valid_days < 1:
        raise UsageError("--valid-days must be at least 1")


@contextmanager
def _hint_force() -> Iterator[None]:
    """A refused overwrite says how to allow it (cli/common.py prints it, exit 1)."""
    try:
        yield
    except FileExistsError as error:
        hint = "exists; nothing written (--force replaces it)"
        raise FileExistsError(errno.EEXIST, hint, error.filename) from None


def _init(args: argparse.Namespace) -> int:
    from raftlog.testing import dev_ca

    _check_valid_days(args)
    with _hint_force():
        dev_ca.init_ca(args.dir, valid_days=args.valid_days, overwrite=args.force)
    cert_path, key_path = dev_ca.paths(args.dir, dev_ca.CA_NAME)
    print(f"CA certificate: {cert_path}")
    print(f"CA key (keep it private): {key_path}")
    return EXIT_OK


def _hosts(args: argparse.Namespace) -> tuple[str, ...]:
    from raftlog.testing.dev_ca import DEFAULT_HOSTS

    if args.host is None:
        return DEFAULT_HOSTS if args.node else ()
    if args.client:
        raise UsageError("--host is for --node certificates only")
    for host in args.host:
        if not host or any(c.isspace() or c in ",/" for c in host):
            raise UsageError(f"--host: {host!r} is not a host name or IP address")
    return tuple(args.host)


def _issue(args: argparse.Namespace) -> int:
    from cryptography.exceptions import UnsupportedAlgorithm

    from raftlog.node.config import check_id
    from raftlog.testing import dev_ca

    _check_valid_days(args)
    flag, name = ("--node", args.node) if args.node else ("--client", args.client)
    # Node ids and client names share the rule (they are file names and DNS names here).
    check_id(flag, name)
    if name == dev_ca.CA_NAME:
        raise UsageError(f"{flag}: {name!r} is the CA's own file name; choose another")
    hosts = _hosts(args)
    ca_cert, ca_key = dev_ca.paths(args.dir, dev_ca.CA_NAME)
    for path in (ca_cert, ca_key):
        if not os.path.isfile(path):
            raise UsageError(f"no CA in {args.dir} ({path} is missing): run `raftlog certs init`")
    try:
        with _hint_force():
            cert_path, key_path = dev_ca.issue(
                args.dir, name, hosts, valid_days=args.valid_days, overwrite=args.force
            )
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        raise UsageError(f"the CA in {args.dir} cannot be read: {error}") from None
    print(f"certificate: {cert_path}")
    print(f"key (keep it private): {key_path}")
    return EXIT_OK
