"""`raftlog member list|add|remove|promote`: the Raft group's membership (docs/operations.md,
"Membership changes").

Rules this module keeps: like the client commands, every command takes ``--servers
host:port,...`` (default: ./data/cluster.json, else 127.0.0.1:7701..7703), ``--timeout-s`` and
the TLS flags (common.connect); a malformed argument is a usage error (exit 2) found before
anything is sent; a refused change (unknown member, not caught up, quorum, one change at a
time) exits 1 with the node's message (cli/common.py); an unknown outcome exits 3. Output is
one line per member, or one line saying what changed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from raftlog.cli.common import EXIT_OK, UsageError, add_connection_flags, connect

if TYPE_CHECKING:  # the client is imported lazily: `raftlog --help` stays fast
    from raftlog.client import Member


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `member list|add|remove|promote`."""
    member = commands.add_parser("member", help="list or change the cluster's members")
    actions = member.add_subparsers(dest="member_command", required=True)
    add_connection_flags(actions.add_parser("list", help="each member's id, address and role"))
    add = actions.add_parser("add", help="add a node as a learner (it catches up, not voting)")
    add.add_argument("node", metavar="NODE=HOST:PORT", help="the new member's id and address")
    add_connection_flags(add)
    remove = actions.add_parser("remove", help="remove a member (a leader hands over first)")
    remove.add_argument("node", metavar="NODE")
    add_connection_flags(remove)
    promote = actions.add_parser("promote", help="make a caught-up learner a voter")
    promote.add_argument("node", metavar="NODE")
    add_connection_flags(promote)


def parse_node_address(text: str) -> tuple[str, str]:
    """``"n4=host:port"`` -> ("n4", "host:port"); UsageError when it is not of that form."""
    node_id, sep, address = text.partition("=")
    host, colon, port = address.rpartition(":")
    if not sep or not node_id or not colon or not host or not port.isdigit():
        raise UsageError(f"expected NODE=HOST:PORT (e.g. n4=127.0.0.1:7704), got {text!r}")
    return node_id, address


def run(args: argparse.Namespace) -> int:
    """Dispatch one member command."""
    from raftlog.client import Admin

    if args.member_command == "add":
        node_id, address = parse_node_address(args.node)
    with connect(args) as connection, Admin(connection, timeout_s=args.timeout_s) as admin:
        if args.member_command == "list":
            _print_members(admin.list_members())
        elif args.member_command == "add":
            _print_members(admin.add_member(node_id, address))
            print(
                f"added {node_id} at {address} as a learner; once it has caught up: "
                f"raftlog member promote {node_id}"
            )
        elif args.member_command == "promote":
            _print_members(admin.promote_member(args.node))
            print(f"promoted {args.node} to voter")
        else:
            _print_members(admin.remove_member(args.node, timeout_s=args.timeout_s))
            print(f"removed {args.node}; stop its process now (it no longer takes part)")
    return EXIT_OK


def _print_members(members: list[Member]) -> None:
    rows = [("NODE", "ADDRESS", "ROLE", "")]
    for member in members:
        leader = "leader" if member.role == "leader" else ""
        rows.append(
            (member.node_id, member.address, "voter" if member.voter else "learner", leader)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
