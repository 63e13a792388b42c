"""`raftlog node health`: ask a node's grpc.health.v1 service whether it is SERVING.

Used by the container image's HEALTHCHECK (deploy/Dockerfile) and handy from a shell. Exit 0
when the node answers SERVING, 1 otherwise (NOT_SERVING, no answer, refused), 2 for a bad
``--address``. The address defaults to this container's own node: ``RAFTLOG_LISTEN_ADDRESS``
with a wildcard host (0.0.0.0, ::) replaced by the loopback address, else 127.0.0.1:7701.

Rules this module keeps: it imports only grpc and grpc_health (no raftlog packages), so a probe
stays cheap; it can also run as ``python -m raftlog.cli.health``, which skips building the whole
command line.
"""

from __future__ import annotations

import argparse
import os
import sys

DEFAULT_ADDRESS = "127.0.0.1:7701"
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}


def default_address(env: dict[str, str] | None = None) -> str:
    """This node's own address, from RAFTLOG_LISTEN_ADDRESS (wildcard host -> loopback)."""
    listen = (os.environ if env is None else env).get("RAFTLOG_LISTEN_ADDRESS", "")
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        return DEFAULT_ADDRESS
    return f"{_WILDCARDS.get(host, host)}:{port}"


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        default=None,
        help="host:port of the node (default: RAFTLOG_LISTEN_ADDRESS with a wildcard host "
        f"replaced by loopback, else {DEFAULT_ADDRESS})",
    )
    parser.add_argument(
        "--service", default="", help='the health service name (default "": the whole node)'
    )
    parser.add_argument(
        "--timeout", type=float, default=2.0, help="seconds to wait for an answer (default 2)"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing; only the exit code")
    parser.set_defaults(handler=run)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `node health` under the `node` command that cli_node.add_parser created."""
    node = commands.choices["node"]
    for action in node._actions:
        if isinstance(action, argparse._SubParsersAction):
            _configure(action.add_parser("health", help="check a node's gRPC health (exit 0)"))
            return
    raise RuntimeError("the `node` command has no subcommands to add `health` to")


def check(address: str, service: str = "", timeout_s: float = 2.0) -> str:
    """The status name the node reports ("SERVING", "NOT_SERVING", ...), or "UNREACHABLE"."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else None
            return "UNREACHABLE" if code is None else f"UNREACHABLE ({code.name})"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def run(args: argparse.Namespace) -> int:
    address = args.address or default_address()
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        print(f"raftlog: --address: {address!r} is not of the form host:port", file=sys.stderr)
        return 2
    status = check(address, args.service, args.timeout)
    if not args.quiet:
        print(f"{address} {status}")
    return 0 if status == "SERVING" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="raftlog-health", description="check a raftlog node's gRPC health"
    )
    _configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
