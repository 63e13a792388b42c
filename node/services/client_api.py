"""Registers a node's client API (Producer, Consumer, Admin, AccessControl; client.proto) on a
gRPC server.

Rules this module keeps:
- All four services are served by every node on the same server (client.proto): one call
  registers them together, over the same store, write path and limits.
- The node stops the services (``ClientServices.stop``: ends long polls and transaction check
  streams) before it stops the gRPC server, so the server's grace period is not spent in
  them.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from raftlog.node.membership import Membership
from raftlog.node.services.access_control import AccessControlService
from raftlog.node.services.admin import AdminService
from raftlog.node.services.consumer import ConsumerService
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.services.producer import ProducerService
from raftlog.node.transaction_path import TransactionPath
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2_grpc
from raftlog.store.message_store import MessageStore


@dataclass(frozen=True, slots=True)
class ClientServices:
    """The servicers registered on one server."""

    producer: ProducerService
    consumer: ConsumerService
    admin: AdminService
    access_control: AccessControlService

    def stop(self) -> None:
        self.consumer.stop()
        self.producer.stop()


def add_client_services(
    server: grpc.Server,
    store: MessageStore,
    write_path: WritePath,
    limits: ServiceLimits | None = None,
    membership: Membership | None = None,
    *,
    metrics_url: str = "",
    transactions: TransactionPath | None = None,
) -> ClientServices:
    """Build the four servicers and add them to ``server`` (before ``server.start()``);
    ``membership``: the node's membership changes (None: the Admin RPCs for them refuse);
    ``metrics_url``: the node's Prometheus endpoint, which ClusterStatus reports ("" = none);
    ``transactions``: the Raft member's transaction coordinator (None: transactional calls
    refuse)."""
    limits = limits if limits is not None else ServiceLimits()
    services = ClientServices(
        producer=ProducerService(store, write_path, limits, transactions),
        consumer=ConsumerService(store, write_path, limits),
        admin=AdminService(store, write_path, limits, membership, metrics_url),
        access_control=AccessControlService(store.access_rules, write_path, limits),
    )
    client_pb2_grpc.add_ProducerServicer_to_server(services.producer, server)  # type: ignore[no-untyped-call]
    client_pb2_grpc.add_ConsumerServicer_to_server(services.consumer, server)  # type: ignore[no-untyped-call]
    client_pb2_grpc.add_AdminServicer_to_server(services.admin, server)  # type: ignore[no-untyped-call]
    client_pb2_grpc.add_AccessControlServicer_to_server(services.access_control, server)  # type: ignore[no-untyped-call]
    return services
