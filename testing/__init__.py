"""raftlog.testing: real raftlog clusters for tests, your own and ours.

- ``RaftlogCluster`` (``raftlog.testing.cluster``) starts a 3-node cluster of the
  ``raftlog:dev`` image (docs/deploy.md) on a private Docker network with testcontainers, and
  gives clients that work from the host (``cluster.producer()``, ``cluster.consumer(...)``,
  ``cluster.admin()``). The pytest fixture ``raftlog_cluster`` lives in
  ``raftlog.testing.pytest_plugin``. Needs a Docker engine and the ``testcontainers`` package
  (the ``testing`` extra; README, "Use it in your project").
- ``LocalCluster`` (``raftlog.testing.local_cluster``) starts real node processes on
  127.0.0.1; ``raftlog cluster up`` is built on it. It needs nothing beyond raftlog itself.

Rule this module keeps: importing the package imports neither harness, so the CLI's local
cluster works without testcontainers; the container names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raftlog.testing.cluster import ClusterError, RaftlogCluster
    from raftlog.testing.docker_objects import (
        LABEL_OWNER,
        LABEL_RUN,
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


_HOME = {"ClusterError": "cluster", "RaftlogCluster": "cluster"}


def __getattr__(name: str) -> object:
    if name in __all__:
        module = _HOME.get(name, "docker_objects")
        return getattr(importlib.import_module(f"raftlog.testing.{module}"), name)
    raise AttributeError(f"module 'raftlog.testing' has no attribute {name!r}")
