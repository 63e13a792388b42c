"""NodeServer: the gRPC servers of one node, on two ports. The client port serves the client
services (Producer, Consumer, Admin), gRPC health checking and server reflection; the peer
port serves only the peer service of the node's replication mode (RaftPeer, or HaPeer).

Rules this module keeps: the client port never serves a peer method (they are different
``grpc.Server`` objects, so a peer method called on the client port is UNIMPLEMENTED), which
lets the peer port be firewalled, and later authenticated, apart; each server has its own
thread pool, so a burst of long polls on the client port cannot starve Raft traffic of
threads; health reports SERVING only between ``start`` and ``stop``; ``stop`` answers
in-flight calls within its grace.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from raftlog.node.membership import Membership
from raftlog.node.metrics import NodeMetrics
from raftlog.node.security.access import AccessPolicy
from raftlog.node.security.acl_check import AclCheck
from raftlog.node.security.tls import NodeTls
from raftlog.node.security.tokens import TokenCheck, TokenFile
from raftlog.node.services.client_api import ClientServices, add_client_services
from raftlog.node.services.health import NodeHealth
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.services.request_guard import RequestGuard
from raftlog.node.transaction_path import TransactionPath
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2
from raftlog.store.message_store import MessageStore

_MAX_CLIENT_WORKERS = 64
# One inbound stream per peer, plus segment fetches of snapshot installs.
_MAX_PEER_WORKERS = 16
_MAX_GRPC_MESSAGE_BYTES = 64 << 20
_SERVER_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_send_message_length", _MAX_GRPC_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", _MAX_GRPC_MESSAGE_BYTES),
    # Peers ping every second to notice a stalled stream; allow it.
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 500),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.so_reuseport", 0),
]
CLIENT_SERVICE_NAMES = (
    client_pb2.DESCRIPTOR.services_by_name["Producer"].full_name,
    client_pb2.DESCRIPTOR.services_by_name["Consumer"].full_name,
    client_pb2.DESCRIPTOR.services_by_name["Admin"].full_name,
    client_pb2.DESCRIPTOR.services_by_name["AccessControl"].full_name,
)


class NodeServer:
    def __init__(
        self,
        listen_address: str,
        peer_listen_address: str,
        store: MessageStore,
        write_path: WritePath,
        add_peer_service: Callable[[grpc.Server], None],
        peer_service_name: str,
        limits: ServiceLimits,
        membership: Membership | None = None,
        metrics: NodeMetrics | None = None,
        tls: NodeTls | None = None,
        tokens: TokenFile | None = None,
        access: AccessPolicy | None = None,
        transactions: TransactionPath | None = None,
    ) -> None:
        interceptors = (*((metrics.rpc,) if metrics is not None else ()), RequestGuard())
        # Tokens and access rules guard the client port only: the peer port is mTLS's. The
        # access check runs inside the request guard, so it only sees requests that parsed.
        token_check = TokenCheck(tokens) if tokens else None
        client_interceptors: list[grpc.ServerInterceptor] = [*interceptors]
        if token_check is not None:
            client_interceptors.insert(0, token_check)
        if access is not None:
            client_of = token_check.client_of if token_check is not None else None
            client_interceptors.append(
                AclCheck(access, client_of, lambda: write_path.cluster_view().role == "leader")
            )
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=_MAX_CLIENT_WORKERS, thread_name_prefix="grpc"),
            options=_SERVER_OPTIONS,
            interceptors=client_interceptors,
        )
        self._peer_server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=_MAX_PEER_WORKERS, thread_name_prefix="peer"),
            options=_SERVER_OPTIONS,
            interceptors=interceptors,
        )
        self._services: ClientServices = add_client_services(
            self._server,
            store,
            write_path,
            limits,
            membership,
            metrics_url=metrics.url if metrics is not None else "",
            transactions=transactions,
        )
        add_peer_service(self._peer_server)
        self._service_names = CLIENT_SERVICE_NAMES
        self._health = NodeHealth()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        reflection.enable_server_reflection(
            (*self._service_names, health.SERVICE_NAME, reflection.SERVICE_NAME), self._server
        )
        self.port = _bind(
            self._server, listen_address, tls.client_port_credentials() if tls else None
        )
        self.peer_port = _bind(
            self._peer_server, peer_listen_address, tls.peer_port_credentials() if tls else None
        )

    def _set_health(self, status: int) -> None:
        for name in ("", *self._service_names):
            self._health.set(name, status)

    def start(self) -> None:
        self._peer_server.start()
        self._server.start()
        self._set_health(health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace_s: float) -> None:
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self._services.stop()
        client_stopped = self._server.stop(grace_s)
        self._peer_server.stop(grace_s).wait()
        client_stopped.wait()


def _bind(server: grpc.Server, address: str, credentials: grpc.ServerCredentials | None) -> int:
    if credentials is None:
        port = int(server.add_insecure_port(address))
    else:
        port = int(server.add_secure_port(address, credentials))
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return port
