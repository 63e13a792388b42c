"""NodeServer: the gRPC server of one node: client services (Producer, Consumer, Admin), the
peer service of its replication mode (RaftPeer, or HaPeer on a master), gRPC health checking
and server reflection, on one port.

Rules this module keeps: the thread pool is sized for the long-lived calls a node holds (one
inbound Raft stream per peer, long polls) plus request handlers, so a burst of long polls
cannot starve Raft traffic of threads below ``_MIN_FREE_WORKERS``; health reports SERVING
only between ``start`` and ``stop``; ``stop`` answers in-flight calls within its grace.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from raftlog.node.membership import Membership
from raftlog.node.metrics import NodeMetrics
from raftlog.node.services.client_api import ClientServices, add_client_services
from raftlog.node.services.health import NodeHealth
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.services.request_guard import RequestGuard
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2
from raftlog.store.message_store import MessageStore

_MAX_WORKERS = 64
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
)


class NodeServer:
    def __init__(
        self,
        listen_address: str,
        store: MessageStore,
        write_path: WritePath,
        add_peer_service: Callable[[grpc.Server], None],
        peer_service_name: str,
        limits: ServiceLimits,
        membership: Membership | None = None,
        metrics: NodeMetrics | None = None,
    ) -> None:
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=_MAX_WORKERS, thread_name_prefix="grpc"),
            options=_SERVER_OPTIONS,
            interceptors=(*((metrics.rpc,) if metrics is not None else ()), RequestGuard()),
        )
        self._services: ClientServices = add_client_services(
            self._server,
            store,
            write_path,
            limits,
            membership,
            metrics_url=metrics.url if metrics is not None else "",
        )
        add_peer_service(self._server)
        self._service_names = (*CLIENT_SERVICE_NAMES, peer_service_name)
        self._health = NodeHealth()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        reflection.enable_server_reflection(
            (*self._service_names, health.SERVICE_NAME, reflection.SERVICE_NAME), self._server
        )
        self.port = self._server.add_insecure_port(listen_address)
        if self.port == 0:
            raise OSError(f"cannot listen on {listen_address}")

    def _set_health(self, status: int) -> None:
        for name in ("", *self._service_names):
            self._health.set(name, status)

    def start(self) -> None:
        self._server.start()
        self._set_health(health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace_s: float) -> None:
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self._services.stop()
        self._server.stop(grace_s).wait()
