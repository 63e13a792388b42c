"""What the local cluster harness asks of the machine and of a node process: is a port free,
is a PID still the node it started, does the node serve, whom does it know as leader.

Rules this module keeps: only 127.0.0.1 is probed; every call is bounded by a short timeout;
a PID is judged by /proc (a zombie counts as gone; its command line tells whose it is).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from raftlog.client.admin import Admin
from raftlog.client.connection import Connection
from raftlog.client.errors import RaftlogError
from raftlog.client.tls import ClientTls

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def port_in_use(port: int) -> bool:
    """Whether something accepts connections on ``port`` of 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        return probe.connect_ex((HOST, port)) == 0


def cmdline(pid: int) -> str:
    """The command line of ``pid`` ("" when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def health(address: str, timeout_s: float = 1.0, tls: ClientTls | None = None) -> str:
    """The gRPC health status name at ``address`` ("SERVING", "NOT_SERVING", ...) or
    "UNREACHABLE"."""
    try:
        with (
            grpc.secure_channel(address, tls.credentials(), options=tls.channel_options())
            if tls is not None
            else grpc.insecure_channel(address)
        ) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            response = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
    except grpc.RpcError:
        return "UNREACHABLE"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def leader_address(
    addresses: Sequence[str],
    timeout_s: float = 1.0,
    tls: ClientTls | None = None,
    token: str | None = None,
) -> str | None:
    """The leader's address as the first answering node reports it, or None."""
    for address in addresses:
        try:
            with (
                Connection([address], tls=tls, token=token) as connection,
                Admin(connection, timeout_s=timeout_s) as admin,
            ):
                status = admin.cluster_status(address=address)
        except RaftlogError:
            continue
        if status.leader_address:
            return status.leader_address
    return None
