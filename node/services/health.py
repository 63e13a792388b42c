"""gRPC health checking for a node: grpcio-health-checking's servicer plus ``List``.

The package implements Check and Watch; ``grpc.health.v1.Health/List`` (a snapshot of every
service's status) is left to the base class, which answers UNIMPLEMENTED and makes gRPC log a
traceback. Rules this module keeps: List answers from the same table, under the same lock, as
Check, so the two never disagree.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2


class NodeHealth(health.HealthServicer):  # type: ignore[misc]
    """Check, Watch and List over one table of service statuses."""

    def List(
        self, request: health_pb2.HealthListRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthListResponse:
        with self._lock:
            statuses = dict(self._server_status)
        return health_pb2.HealthListResponse(
            statuses={
                name: health_pb2.HealthCheckResponse(status=status)
                for name, status in statuses.items()
            }
        )
