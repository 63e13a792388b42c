"""NodeMetrics: one node's Prometheus registry and what feeds it, built by the node when
``metrics_listen`` is set (node/process.py).

What it wires: the process, platform and garbage-collector collectors prometheus_client
ships; ``RpcMetrics`` (the gRPC server runs it as an interceptor); the replication and store
collectors; the fsync latency histogram, fed by the CommitLog's ``on_fsync`` hook; and the
``MetricsEndpoint`` that serves it all.

Rules this module keeps: one registry per node, never prometheus_client's global one (tests
run several nodes in one process); building it binds the metrics port (see endpoint.py), so
the node builds it before starting anything and stops it if a later step fails.
"""

from __future__ import annotations

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Histogram,
    disable_created_metrics,
)

from raftlog.node.metrics.endpoint import MetricsEndpoint
from raftlog.node.metrics.replication_collector import ReplicationCollector
from raftlog.node.metrics.rpc_interceptor import RpcMetrics
from raftlog.node.metrics.store_collector import StoreCollector
from raftlog.node.write_path import WritePath
from raftlog.store.message_store import MessageStore

# An fsync on a good SSD takes well under a millisecond; on a busy disk, seconds.
FSYNC_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)


def node_registry(
    store: MessageStore, write_path: WritePath
) -> tuple[CollectorRegistry, RpcMetrics]:
    """A registry of every node metric over ``store`` and ``write_path``, and the
    interceptor that feeds its request metrics (the endpoint is apart: tests scrape it
    without a port)."""
    # No "<name>_created" series beside each counter and histogram: Prometheus does not need
    # them (it detects counter resets itself) and they double what a scrape carries.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream
    registry = CollectorRegistry()
    for standard in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(standard)
    rpc = RpcMetrics(registry)
    registry.register(ReplicationCollector(write_path.cluster_view))
    registry.register(StoreCollector(store))
    fsync = Histogram(
        "raftlog_store_fsync_duration_seconds",
        "Time each CommitLog flush spent in fsync (one flush covers every write before it)",
        buckets=FSYNC_BUCKETS_S,
        registry=registry,
    )
    store.commit_log.on_fsync = fsync.observe
    return registry, rpc


class NodeMetrics:
    def __init__(
        self, listen: str, advertised_host: str, store: MessageStore, write_path: WritePath
    ) -> None:
        self.registry, self.rpc = node_registry(store, write_path)
        self.endpoint = MetricsEndpoint(listen, self.registry, advertised_host)

    @property
    def url(self) -> str:
        """``http://host:port/metrics``, as other machines reach it."""
        return self.endpoint.url

    def start(self) -> None:
        self.endpoint.start()

    def stop(self) -> None:
        self.endpoint.stop()
