"""`raftlog acl grant|revoke|list`: the cluster's access rules (docs/security.md, "Access
control").

Rules this module keeps: like the other client commands, every command takes ``--servers``,
``--timeout-s``, the TLS flags and ``--token-file`` (common.connect); permissions are a comma
list of produce, consume, admin or all, checked here before anything is sent (exit 2); a
refusal by the cluster (not allowed, a bad pattern) exits 1 with the node's message; an unknown
outcome exits 3. Output is one line per rule.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from raftlog.cli.common import EXIT_OK, UsageError, add_connection_flags, connect

if TYPE_CHECKING:  # the client is imported lazily: `raftlog --help` stays fast
    from raftlog.client import AclRule

_PERMISSION_NAMES = ("produce", "consume", "admin", "all")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `acl grant|revoke|list`."""
    acl = commands.add_parser("acl", help="grant, revoke or list access rules")
    acl.set_defaults(handler=run)
    actions = acl.add_subparsers(dest="acl_command", required=True)
    grant = actions.add_parser("grant", help="let a client do something on some topics")
    revoke = actions.add_parser("revoke", help="take permissions back (none named: all)")
    for parser, required in ((grant, True), (revoke, False)):
        parser.add_argument("subject", help="a client name (token name or certificate CN), or *")
        parser.add_argument(
            "topic_pattern", help="a topic, a prefix ending in * (orders-*), or * (every topic)"
        )
        parser.add_argument(
            "permissions",
            nargs=None if required else "?",
            default="",
            metavar="PERMISSIONS",
            help="comma list of produce, consume, admin, all",
        )
        add_connection_flags(parser)
    listing = actions.add_parser("list", help="every rule, or one client's")
    listing.add_argument("--subject", default=None, help="only this client's rules")
    add_connection_flags(listing)


def parse_permission_list(text: str) -> list[str]:
    """``"produce,consume"`` -> ["produce", "consume"]; UsageError on an unknown name."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in _PERMISSION_NAMES:
            raise UsageError(
                f"unknown permission {name!r}: expected a comma list of "
                f"{', '.join(_PERMISSION_NAMES)}"
            )
    return names


def run(args: argparse.Namespace) -> int:
    """Dispatch one acl command."""
    from raftlog.client import Admin

    permissions = parse_permission_list(getattr(args, "permissions", "") or "")
    if args.acl_command == "grant" and not permissions:
        raise UsageError("name at least one permission to grant (produce, consume, admin, all)")
    with connect(args) as connection, Admin(connection, timeout_s=args.timeout_s) as admin:
        if args.acl_command == "list":
            _print_rules(admin.list_acls(args.subject))
        elif args.acl_command == "grant":
            _print_rules(admin.grant_acl(args.subject, args.topic_pattern, permissions))
        else:
            _print_rules(admin.revoke_acl(args.subject, args.topic_pattern, permissions))
    return EXIT_OK


def _print_rules(rules: list[AclRule]) -> None:
    rows = [("SUBJECT", "TOPICS", "PERMISSIONS")]
    rows += [(r.subject, r.topic_pattern, ",".join(r.permissions)) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
