"""The ``raftlog_cluster`` pytest fixture: a RaftlogCluster for the whole test session.

Use it in your tests with, in ``conftest.py``::

    pytest_plugins = ["raftlog.testing.pytest_plugin"]

and then ``def test_x(raftlog_cluster): ...``. It skips the test, with the reason, when no
Docker engine answers. The image is ``raftlog:dev`` unless ``RAFTLOG_TEST_IMAGE`` names
another. Tests share the cluster: give each its own topic.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from raftlog.testing.cluster import DEFAULT_IMAGE, RaftlogCluster
from raftlog.testing.docker_objects import docker_available


@pytest.fixture(scope="session")
def raftlog_cluster() -> Iterator[RaftlogCluster]:
    """A running 3-node raftlog cluster in containers, removed at the end of the session."""
    reason = docker_available()
    if reason is not None:
        pytest.skip(reason)
    with RaftlogCluster(os.environ.get("RAFTLOG_TEST_IMAGE", DEFAULT_IMAGE)) as cluster:
        yield cluster
