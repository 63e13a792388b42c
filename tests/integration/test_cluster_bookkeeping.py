"""The local cluster's bookkeeping survives mistakes (issue 16): a second `cluster up` on a
running cluster's directory changes nothing; `cluster down` finds the nodes by their store
locks even when cluster.json lost their pids, never signals a process that is not ours, and
names the nodes it had to kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from raftlog.testing.local_cluster import LocalCluster
from raftlog.testing.running_nodes import node_pid
from tests.integration.test_cli_cluster import cli

pytestmark = pytest.mark.integration


def test_up_twice_then_down_from_stale_bookkeeping(tmp_path: Path) -> None:
    data = tmp_path / "data"
    state = data / "cluster.json"
    code, _out, err = cli("cluster", "up", "--data-dir", str(data), "--base-port", "0")
    assert code == 0, err
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        recorded = state.read_bytes()
        code, out, err = cli("cluster", "up", "--data-dir", str(data), "--base-port", "0")
        assert code != 0
        assert "already running" in err and "nothing was changed" in err, out + err
        assert state.read_bytes() == recorded

        # What the old failed `up` left: no pids; here n1's pid even names another process.
        document = json.loads(recorded)
        pids = {n["node_id"]: node_pid(n["data_dir"], n["node_id"]) for n in document["nodes"]}
        assert all(pids.values()), pids
        for node in document["nodes"]:
            node["pid"] = bystander.pid if node["node_id"] == "n1" else None
        state.write_text(json.dumps(document))
        # A node that cannot act on SIGTERM is killed, and named.
        os.kill(pids["n3"], signal.SIGSTOP)

        code, out, err = cli("cluster", "down", "--data-dir", str(data), "--timeout", "15")
        assert code == 0, err
        assert "stopped 2 node(s) gracefully: n1, n2" in out, out
        assert "killed 1 node(s)" in out and "n3" in out, out
        assert bystander.poll() is None
        for node_id in ("n1", "n2"):
            assert not (data / node_id / "store" / "abort").exists()
        assert not LocalCluster.load(str(data)).adopt_running()
    finally:
        bystander.kill()
        bystander.wait()
        LocalCluster.load(str(data)).stop(timeout_s=5)
