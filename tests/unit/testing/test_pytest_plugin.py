"""The ``raftlog_cluster`` fixture without a Docker engine (DOCKER_HOST pointed at nothing), run
as a user's pytest session in a subprocess: skipped by default, one failing line under
RAFTLOG_REQUIRE_DOCKER=1, and never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

USER_TEST = """
pytest_plugins = ["raftlog.testing.pytest_plugin"]


def test_uses_the_cluster(raftlog_cluster):
    assert raftlog_cluster.node_ids
"""


def _pytest_without_docker(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_user.py").write_text(USER_TEST, encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if k != "RAFTLOG_REQUIRE_DOCKER"}
    environment.update(DOCKER_HOST=f"unix://{tmp_path}/no-docker.sock", **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_docker_the_fixture_skips_with_the_reason(tmp_path: Path) -> None:
    done = _pytest_without_docker(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "raftlog_cluster skipped: no Docker engine answers" in done.stdout
    assert "RAFTLOG_REQUIRE_DOCKER=1 to fail instead" in done.stdout


@pytest.mark.parametrize("value", ["1", "true"])
def test_require_docker_turns_the_skip_into_a_one_line_failure(tmp_path: Path, value: str) -> None:
    done = _pytest_without_docker(tmp_path, RAFTLOG_REQUIRE_DOCKER=value)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout
    assert "raftlog_cluster: Docker required (RAFTLOG_REQUIRE_DOCKER=1), but no Docker engine" in (
        done.stdout
    )
    assert "Traceback" not in done.stdout
    assert "docker_objects.py" not in done.stdout  # no frames from the library
