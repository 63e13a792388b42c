"""Fixtures for tests/containers: the raftlog:dev image (built from this checkout once per
session), a fresh RaftlogCluster per test, and a session-end check that no container, network
or volume of these tests is left in Docker.

Every test module here sets ``pytestmark = pytest.mark.containers``: `make test` runs them
(`make test-containers` runs only them). Without a Docker engine they are skipped, and the
run's last lines say so with the reason; with ``RAFTLOG_REQUIRE_DOCKER=1`` (CI) they fail
instead.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.testing import RaftlogCluster, docker_available, leftovers, remove_by_label
from raftlog.testing.docker_objects import image_present, missing_image_message
from raftlog.testing.pytest_plugin import skip_without_docker

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("RAFTLOG_TEST_IMAGE", "raftlog:dev")
BUILD_TIMEOUT_S = 600
_RUN_IDS: list[str] = []
_SKIP_REASON: str | None = None


@pytest.fixture(scope="session")
def raftlog_image() -> str:
    """The node image under test. ``raftlog:dev`` is (re)built from this checkout once per
    session, so these tests never run an image of older code: deploy/build-image is
    idempotent and Docker's layer cache keeps an unchanged build to seconds (a source change
    rebuilds raftlog's own two layers, about a minute here). RAFTLOG_TEST_IMAGE names an image
    to test as it is."""
    global _SKIP_REASON
    _SKIP_REASON = docker_available()
    skip_without_docker("container tests")
    if IMAGE != "raftlog:dev":
        if not image_present(IMAGE):
            pytest.fail(f"{missing_image_message(IMAGE)} (RAFTLOG_TEST_IMAGE)", pytrace=False)
        return IMAGE
    started = time.monotonic()
    env = {**os.environ, "PYTHON": str(REPO / ".venv" / "bin" / "python")}
    built = subprocess.run(
        [str(REPO / "deploy" / "build-image")],
        cwd=REPO,
        env=env,
        check=False,
        timeout=BUILD_TIMEOUT_S,
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        pytest.fail(f"deploy/build-image failed ({built.returncode}):\n{built.stderr[-3000:]}")
    print(f"\nbuilt {IMAGE} in {time.monotonic() - started:.0f} s")
    return IMAGE


@pytest.fixture
def cluster(raftlog_image: str) -> Iterator[RaftlogCluster]:
    running = RaftlogCluster(raftlog_image)
    _RUN_IDS.append(running.run_id)
    with running:
        yield running


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Say so when these tests could not run; fail the run if anything of these tests is
    still in Docker (and remove it)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if _SKIP_REASON is not None and reporter is not None:
        reporter.write_line(f"container tests: NOT RUN: {_SKIP_REASON}")
    if not _RUN_IDS:
        return
    left = [item for run_id in _RUN_IDS for item in leftovers(run_id)]
    if left:
        for run_id in _RUN_IDS:
            remove_by_label(run_id)
        message = f"container tests LEFT BEHIND (now removed): {', '.join(left)}"
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        message = (
            f"container tests: nothing left behind ({len(_RUN_IDS)} clusters; checked "
            "containers, networks and volumes by label raftlog.test.run)"
        )
    if reporter is not None:
        reporter.write_line(message)
