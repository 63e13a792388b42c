"""`raftlog controller start|status`: run one member of the master-slave controller group, or
show what the controller holds for a broker group.

Rules this module keeps: the password never travels on the command line (it would show in
`ps`): it comes from ``RAFTLOG_CONTROLLER_PASSWORD`` or ``--password-file``; a bad setting is one
line and exit status 2 before anything opens.
"""

from __future__ import annotations

import argparse
import os

from raftlog.cli.common import EXIT_OK, UsageError
from raftlog.controller.config import DEFAULT_LEASE_MS


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `controller start|status`."""
    controller = commands.add_parser("controller", help="the master-slave controller group")
    actions = controller.add_subparsers(dest="controller_command", required=True)
    start = actions.add_parser(
        "start",
        help="run one controller member (until SIGTERM/SIGINT)",
        description="The password comes from RAFTLOG_CONTROLLER_PASSWORD or --password-file "
        "(never a flag: it would show in ps). pysyncobj listens on this member's raft address "
        "only, never on a wildcard.",
    )
    start.add_argument("--id", required=True, help="this member's id (one of --peers)")
    start.add_argument(
        "--peers",
        required=True,
        help="every member: c1=raft_host:port/grpc_host:port,c2=...,c3=...",
    )
    start.add_argument("--data-dir", required=True, help="pysyncobj's journal and dump")
    start.add_argument("--password-file", help="a file holding the group's password")
    start.add_argument(
        "--lease-ms",
        type=int,
        default=DEFAULT_LEASE_MS,
        help=f"masters' lease (default {DEFAULT_LEASE_MS})",
    )
    status = actions.add_parser("status", help="a broker group as the controller sees it")
    status.add_argument("--controllers", required=True, help="gRPC host:port,... of the members")
    status.add_argument("--broker-name", default="broker-a", help="default broker-a")


def _password(args: argparse.Namespace) -> str:
    from raftlog.controller.config import PASSWORD_ENV

    if args.password_file:
        try:
            with open(args.password_file) as handle:
                return handle.read().strip()
        except OSError as error:
            raise UsageError(
                f"--password-file: cannot read {args.password_file}: {error.strerror}"
            ) from None
    return os.environ.get(PASSWORD_ENV, "")


def run(args: argparse.Namespace) -> int:
    if args.controller_command == "status":
        return _status(args)
    from raftlog.controller.config import ConfigError, ControllerConfig, parse_controller_peers

    try:
        config = ControllerConfig(
            member_id=args.id,
            peers=parse_controller_peers(args.peers),
            data_dir=args.data_dir,
            password=_password(args),
            lease_ms=args.lease_ms,
        )
    except ConfigError as error:
        raise UsageError(str(error)) from None
    from raftlog.controller.server import serve

    return serve(config)


def _status(args: argparse.Namespace) -> int:
    from raftlog.controller.client import ControllerClient

    addresses = [a.strip() for a in args.controllers.split(",") if a.strip()]
    if not addresses:
        raise UsageError("--controllers: no address")
    client = ControllerClient(addresses)
    try:
        group = client.get_group(args.broker_name)
    finally:
        client.close()
    print(
        f"broker group {group.broker_name}: master {group.master_id or 'none'}, epoch "
        f"{group.master_epoch}"
    )
    print(f"in sync: {','.join(group.in_sync) or 'none'}; alive: {','.join(group.alive) or 'none'}")
    for node_id, address in sorted(group.members.items()):
        print(f"  {node_id}  {address}")
    return EXIT_OK
