"""The ``raftlog_cluster`` pytest fixture: a RaftlogCluster for the whole test session.

Use it in your tests with, in ``conftest.py``::

    pytest_plugins = ["raftlog.testing.pytest_plugin"]

and then ``def test_x(raftlog_cluster): ...``. The image is ``raftlog:dev`` unless
``RAFTLOG_TEST_IMAGE`` names another. Tests share the cluster (it starts once per session),
so each test gives itself its own topic and undoes its own faults before it ends (a node it
killed or paused is started or resumed again, a disconnected one reconnected), and waits with
``wait_for_leader``/``wait_converged`` where the next test needs a whole cluster.

Rules this module keeps, for a fixture that cannot run: no Docker engine skips the test with
the reason, or fails it when ``RAFTLOG_REQUIRE_DOCKER=1`` (CI: a green run must have run the
tests); a missing image fails with one line (the one the chaos CLI gives), never a
traceback from the Docker SDK; nothing is pulled.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from raftlog.testing.cluster import DEFAULT_IMAGE, RaftlogCluster
from raftlog.testing.docker_objects import (
    REQUIRE_DOCKER_ENV,
    docker_available,
    docker_required,
    image_present,
    missing_image_message,
)


def skip_without_docker(what: str) -> None:
    """Skip the test asking for ``what`` when no Docker engine answers, or fail it (one line,
    no traceback) when ``RAFTLOG_REQUIRE_DOCKER=1``. Returns when Docker answers."""
    reason = docker_available()
    if reason is None:
        return
    if docker_required():
        pytest.fail(
            f"{what}: Docker required ({REQUIRE_DOCKER_ENV}=1), but {reason}", pytrace=False
        )
    pytest.skip(f"{what} skipped: {reason} (set {REQUIRE_DOCKER_ENV}=1 to fail instead)")


@pytest.fixture(scope="session")
def raftlog_cluster() -> Iterator[RaftlogCluster]:
    """A running 3-node raftlog cluster in containers, shared by the whole session and
    removed at its end. A test that injects a fault undoes it before it ends."""
    skip_without_docker("raftlog_cluster")
    image = os.environ.get("RAFTLOG_TEST_IMAGE", DEFAULT_IMAGE)
    if not image_present(image):
        pytest.fail(missing_image_message(image), pytrace=False)
    with RaftlogCluster(image) as cluster:
        yield cluster
