"""A three-node LocalCluster of real node processes for one test: started, handed over,
always stopped."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from raftlog.testing.local_cluster import LocalCluster

START_TIMEOUT_S = 30


@contextlib.contextmanager
def three_nodes(tmp_path: Path) -> Iterator[LocalCluster]:
    running = LocalCluster(str(tmp_path / "data"), base_port=0)
    running.start(wait_timeout_s=START_TIMEOUT_S)
    try:
        yield running
    finally:
        running.stop()
