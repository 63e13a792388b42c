"""Fixtures for tests/containers: the raftlog:dev image (built once per session when missing),
a fresh RaftlogCluster per test, and a session-end check that no container, network or
volume of these tests is left in Docker.

Every test module here sets ``pytestmark = pytest.mark.containers``: `make test` leaves
them out, `make test-containers` runs them. Without a Docker engine they are skipped,
with the reason.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.testing import RaftlogCluster, docker_available, leftovers, remove_by_label

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("RAFTLOG_TEST_IMAGE", "raftlog:dev")
BUILD_TIMEOUT_S = 600
_RUN_IDS: list[str] = []


@pytest.fixture(scope="session")
def raftlog_image() -> str:
    reason = docker_available()
    if reason is not None:
        pytest.skip(f"container tests skipped: {reason}")
    present = subprocess.run(
        ["docker", "image", "inspect", IMAGE], capture_output=True, check=False
    )
    if present.returncode != 0:
        if IMAGE != "raftlog:dev":
            pytest.fail(f"no image {IMAGE} (RAFTLOG_TEST_IMAGE); build it first")
        started = time.monotonic()
        env = {**os.environ, "PYTHON": str(REPO / ".venv" / "bin" / "python")}
        subprocess.run(
            [str(REPO / "deploy" / "build-image")],
            cwd=REPO,
            env=env,
            check=True,
            timeout=BUILD_TIMEOUT_S,
        )
        print(f"\nbuilt {IMAGE} in {time.monotonic() - started:.0f} s")
    return IMAGE


@pytest.fixture
def cluster(raftlog_image: str) -> Iterator[RaftlogCluster]:
    running = RaftlogCluster(raftlog_image)
    _RUN_IDS.append(running.run_id)
    with running:
        yield running


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if anything of these tests is still in Docker (and remove it)."""
    if not _RUN_IDS:
        return
    left = [item for run_id in _RUN_IDS for item in leftovers(run_id)]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
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
