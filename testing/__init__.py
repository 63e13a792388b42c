"""raftlog.testing: start a real raftlog cluster in containers for your own tests.

``RaftlogCluster`` starts a 3-node cluster of the ``raftlog:dev`` image (docs/deploy.md) on a
private Docker network with testcontainers, and gives clients that work from the host
(``cluster.producer()``, ``cluster.consumer(...)``, ``cluster.admin()``). The pytest fixture
``raftlog_cluster`` lives in ``raftlog.testing.pytest_plugin``. Needs a Docker engine and the
``testcontainers`` package (``pip install 'raftlog[testing]'``).
"""

from raftlog.testing.cluster import (
    LABEL_OWNER,
    LABEL_RUN,
    ClusterError,
    RaftlogCluster,
    docker_available,
    leftovers,
    remove_by_label,
    sweep_stale,
)

__all__ = [
    "LABEL_OWNER",
    "LABEL_RUN",
    "ClusterError",
    "RaftlogCluster",
    "docker_available",
    "leftovers",
    "remove_by_label",
    "sweep_stale",
]
