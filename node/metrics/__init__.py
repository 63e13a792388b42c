"""A node's Prometheus metrics (docs/operations.md, "Metrics", lists every one).

- rpc_interceptor.py: ``RpcMetrics``, the gRPC server interceptor: status counts and latency
  per method, messages produced and pulled. The only metrics a request pays for.
- replication_collector.py: Raft term, indexes and each follower's lag, or the master-slave
  role, epoch and each slave's lag, read from the write path's ClusterView on scrape.
- store_collector.py: CommitLog bytes and segments, queue offsets, consumer-group lag, read
  from the store on scrape.
- endpoint.py: ``MetricsEndpoint``, the HTTP server on the node's metrics port.
- node_metrics.py: ``NodeMetrics``, one node's registry wiring the above, and the fsync
  latency histogram the CommitLog's ``on_fsync`` hook feeds.

Rules this package keeps: it is the only part of raftlog that imports prometheus_client (an
import-linter contract); every metric is named ``raftlog_...`` with its unit in the name
(``_seconds``, ``_bytes``) and counters end in ``_total``; state is read when Prometheus
scrapes (custom collectors), never kept up to date on the write path.
"""

from raftlog.node.metrics.node_metrics import NodeMetrics

__all__ = ["NodeMetrics"]
