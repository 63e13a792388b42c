"""raftlog.testing as a user meets it, against a real Docker engine: a missing image is one
line (from RaftlogCluster and from the fixture); what a killed test run left (its
containers, its ``raftlog-test-<id>`` network, its volumes) is found and removed by
``raftlog testing sweep``; docs/testing.md's examples pass as written. Each test touches only
the Docker objects of runs it started."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from raftlog.cli import main
from raftlog.testing import ClusterError, RaftlogCluster, leftovers, remove_by_label
from raftlog.testing.docker_objects import labelled_runs, missing_image_message

pytestmark = pytest.mark.containers

NO_IMAGE = "raftlog:no-such-image"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
# Starts a 1-node cluster, prints its run id, then waits to be killed.
_CLUSTER_SCRIPT = """
import sys, time
from raftlog.testing import RaftlogCluster
cluster = RaftlogCluster(sys.argv[1], nodes=1).start()
print(cluster.run_id, flush=True)
time.sleep(600)
"""


def test_a_missing_image_is_one_line_and_leaves_nothing(raftlog_image: str) -> None:
    cluster = RaftlogCluster(NO_IMAGE)
    with pytest.raises(ClusterError) as raised:
        cluster.start()
    assert str(raised.value) == missing_image_message(NO_IMAGE)
    assert str(raised.value) == f"no image {NO_IMAGE!r} in Docker: build it first (make image)"
    assert leftovers(cluster.run_id) == []


def test_the_fixture_says_the_same_for_a_missing_image(raftlog_image: str, tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(
        'pytest_plugins = ["raftlog.testing.pytest_plugin"]\n\n\n'
        "def test_x(raftlog_cluster):\n    pass\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "RAFTLOG_TEST_IMAGE": NO_IMAGE},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"\n{missing_image_message(NO_IMAGE)}\n" in done.stdout
    assert "ImageNotFound" not in done.stdout
    assert len(done.stdout.splitlines()) < 10, done.stdout


def test_sweep_removes_what_a_killed_run_left(
    raftlog_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _CLUSTER_SCRIPT, raftlog_image],
        stdout=subprocess.PIPE,
        text=True,
    )
    run_id = ""
    try:
        assert process.stdout is not None
        run_id = process.stdout.readline().strip()
        assert run_id, "the cluster did not start"
        process.send_signal(signal.SIGKILL)  # no clean-up: the test run "was killed"
        process.wait(timeout=30)
        short = run_id[:8]
        expected = [
            f"container raftlog-test-{short}-n1",
            f"network raftlog-test-{short}",
            f"volume raftlog-test-{short}-n1",
        ]
        assert leftovers(run_id) == expected
        capsys.readouterr()
        assert main(["testing", "sweep", "--run", run_id]) == 0  # this run only: not others'
        output = capsys.readouterr().out
        assert output.startswith(f"removed run {run_id} (owner "), output
        assert output.rstrip().endswith(f"gone): {', '.join(expected)}"), output
        assert leftovers(run_id) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        if run_id:
            remove_by_label(run_id)


def test_the_documented_session_runs_and_leaves_nothing(raftlog_image: str, tmp_path: Path) -> None:
    """docs/testing.md's examples, run as a user's pytest session: the orders test, then the
    leader kill that undoes its fault; nothing of the session's cluster is left after it."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    conftest, orders = blocks[0].split("# test_orders.py\n")
    (tmp_path / "conftest.py").write_text(conftest, encoding="utf-8")
    (tmp_path / "test_orders.py").write_text(orders + "\n\n" + blocks[1], encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "RAFTLOG_TEST_IMAGE": raftlog_image},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output
    assert "2 passed" in output, output
    owner_suffix = f":{process.pid}"
    assert [r for r in labelled_runs() if r.owner.endswith(owner_suffix)] == []
