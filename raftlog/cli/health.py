"""`raftlog node health`: ask a node's grpc.health.v1 service whether it is SERVING.

Used by the container image's HEALTHCHECK (deploy/Dockerfile), the Kubernetes TLS component's
exec probes (deploy/kubernetes/components/tls) and handy from a shell. Exit 0 when the node
answers SERVING, 1 otherwise (NOT_SERVING, no answer, refused), 2 for a bad ``--address`` or
TLS setting. The address defaults to this container's own node: ``RAFTLOG_LISTEN_ADDRESS``
with a wildcard host (0.0.0.0, ::) replaced by the loopback address, else 127.0.0.1:7701.

TLS: with ``--tls-ca`` (and ``--tls-cert``/``--tls-key`` for a node that asks for client
certificates) the check dials TLS. Without those flags it follows this container's own node:
when ``RAFTLOG_TLS_CA_FILE`` is set it trusts that CA, presents the node's own certificate
(``RAFTLOG_TLS_CERT_FILE``/``RAFTLOG_TLS_KEY_FILE``: signed by the same CA, so the node
accepts it as a client certificate) and expects the certificate to name ``RAFTLOG_NODE_ID``
(every node certificate names its node id, which the peers check), so the certificate need
not name the loopback address dialled. ``--server-name`` sets that name by hand.

Rules this module keeps: it imports only grpc and grpc_health (no raftlog packages), so a probe
stays cheap; it can also run as ``python -m raftlog.cli.health``, which skips building the whole
command line; a TLS file that cannot be read is exit 2 with one line naming it.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `raftlog --help` need not load grpc
    import grpc

DEFAULT_ADDRESS = "127.0.0.1:7701"
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}
# The node's own settings (node/config.py), read when no --tls-* flag is given.
_NODE_TLS_ENV = ("RAFTLOG_TLS_CA_FILE", "RAFTLOG_TLS_CERT_FILE", "RAFTLOG_TLS_KEY_FILE")


@dataclass(frozen=True)
class ProbeTls:
    """How the check dials a node that serves TLS: PEM file paths and the name expected in the
    node's certificate (None: the host dialled)."""

    ca_file: str
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None


def default_address(env: dict[str, str] | None = None) -> str:
    """This node's own address, from RAFTLOG_LISTEN_ADDRESS (wildcard host -> loopback)."""
    listen = (os.environ if env is None else env).get("RAFTLOG_LISTEN_ADDRESS", "")
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        return DEFAULT_ADDRESS
    return f"{_WILDCARDS.get(host, host)}:{port}"


def node_tls(env: dict[str, str] | None = None) -> ProbeTls | None:
    """This container's node's TLS settings as a probe uses them; None without TLS."""
    source = os.environ if env is None else env
    ca, cert, key = (source.get(name) or None for name in _NODE_TLS_ENV)
    if ca is None:
        return None
    return ProbeTls(ca, cert, key, source.get("RAFTLOG_NODE_ID") or None)


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
    tls = parser.add_argument_group(
        "TLS",
        "no --tls-* flag: the node's own settings (RAFTLOG_TLS_CA_FILE, RAFTLOG_TLS_CERT_FILE, "
        "RAFTLOG_TLS_KEY_FILE; the name expected: RAFTLOG_NODE_ID); none of those: plain",
    )
    tls.add_argument("--tls-ca", metavar="PEM", help="the CA that signed the node's certificate")
    tls.add_argument("--tls-cert", metavar="PEM", help="a client certificate (mTLS)")
    tls.add_argument("--tls-key", metavar="PEM", help="its private key (mTLS)")
    tls.add_argument(
        "--server-name",
        metavar="NAME",
        help="the name the node's certificate must carry (default: the host dialled)",
    )
    parser.set_defaults(handler=run)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `node health` under the `node` command that cli_node.add_parser created."""
    node = commands.choices["node"]
    for action in node._actions:
        if isinstance(action, argparse._SubParsersAction):
            _configure(action.add_parser("health", help="check a node's gRPC health (exit 0)"))
            return
    raise RuntimeError("the `node` command has no subcommands to add `health` to")


def _channel(address: str, tls: ProbeTls | None) -> grpc.Channel:
    import grpc

    if tls is None:
        return grpc.insecure_channel(address)

    def read(path: str | None) -> bytes | None:
        if path is None:
            return None
        with open(path, "rb") as handle:
            return handle.read()

    credentials = grpc.ssl_channel_credentials(
        root_certificates=read(tls.ca_file),
        private_key=read(tls.key_file),
        certificate_chain=read(tls.cert_file),
    )
    options = (
        [] if tls.server_name is None else [("grpc.ssl_target_name_override", tls.server_name)]
    )
    return grpc.secure_channel(address, credentials, options=options)


def check(
    address: str, service: str = "", timeout_s: float = 2.0, tls: ProbeTls | None = None
) -> str:
    """The status name the node reports ("SERVING", "NOT_SERVING", ...), or "UNREACHABLE".
    OSError when a TLS file cannot be read."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with _channel(address, tls) as channel:
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
    try:
        tls = _tls(args)
        status = check(address, args.service, args.timeout, tls)
    except (ValueError, OSError) as error:
        print(f"raftlog: node health: {error}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"{address} {status}")
    return 0 if status == "SERVING" else 1


def _tls(args: argparse.Namespace) -> ProbeTls | None:
    """The flags' TLS settings, else the node's own (node_tls); ValueError for half a pair."""
    if args.tls_ca is None and args.tls_cert is None and args.tls_key is None:
        tls = node_tls()
        if tls is not None and args.server_name is not None:
            tls = ProbeTls(tls.ca_file, tls.cert_file, tls.key_file, args.server_name)
        return tls
    if args.tls_ca is None:
        raise ValueError("--tls-cert and --tls-key need --tls-ca (the node's CA)")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    return ProbeTls(args.tls_ca, args.tls_cert, args.tls_key, args.server_name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="raftlog-health", description="check a raftlog node's gRPC health"
    )
    _configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
