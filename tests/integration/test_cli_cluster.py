"""End to end through the CLI and the client against a LocalCluster of real node processes
on 127.0.0.1: cluster up/status/down, topics, produce/consume/query, leader transfer, and a
killed-and-restarted follower."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("raftlog.node.process") is None,
        reason="raftlog.node.process cannot be imported (the node is not built yet)",
    ),
]

TIMEOUT_S = 120


def cli(*argv: str, stdin: str | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "raftlog.cli", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    from raftlog.testing.local_cluster import LocalCluster

    data = tmp_path / "data"
    code, _out, err = cli("cluster", "up", "--data-dir", str(data), "--base-port", "0")
    assert code == 0, err
    local = LocalCluster.load(str(data))
    try:
        yield data, ",".join(local.addresses)
    finally:
        code, _out, err = cli("cluster", "down", "--data-dir", str(data))
        LocalCluster.load(str(data)).stop(timeout_s=10)  # belt and braces, by recorded PID
        assert code == 0, err


def test_cli_round_trip(cluster: tuple[Path, str]) -> None:
    data, servers = cluster
    code, out, err = cli("cluster", "status", "--data-dir", str(data))
    assert code == 0, err
    assert out.count("leader") >= 1
    assert "n1" in out and "n2" in out and "n3" in out
    assert cli("topic", "create", "orders", "--queues", "2", "--servers", servers)[0] == 0
    code, out, _ = cli("topic", "list", "--servers", servers)
    assert "orders\t2" in out
    code, out, err = cli(
        "produce", "orders", "hello", "--key", "k1", "--count", "3", "--servers", servers
    )
    assert code == 0, err
    assert out.count("sent ") == 3
    code, out, err = cli("produce", "orders", "--servers", servers, stdin="a\nb\n")
    assert code == 0, err
    code, out, err = cli(
        "consume", "orders", "--group", "g", "--timeout", "2", "--servers", servers
    )
    assert code == 0, err
    assert sorted(line.rsplit(" ", 1)[-1] for line in out.splitlines()) == [
        "a",
        "b",
        "hello",
        "hello",
        "hello",
    ]
    # Committed: the same group sees nothing new.
    code, out, err = cli(
        "consume", "orders", "--group", "g", "--timeout", "1", "--servers", servers
    )
    assert code == 0 and out == "", err
    code, out, _ = cli("query", "key", "orders", "k1", "--servers", servers)
    assert out.count("hello") == 3
    msg_id = out.split("id=", 1)[1].split()[0]
    code, out, _ = cli("query", "id", msg_id, "--servers", servers)
    assert code == 0 and "hello" in out
    code, out, err = cli("produce", "missing", "x", "--servers", servers)
    assert code == 1 and "NotFoundError" in err and "Traceback" not in err
    code, out, err = cli("leader", "transfer", "--servers", servers)
    assert code == 0, err
    assert "leader is n" in out


def test_client_survives_a_killed_follower(cluster: tuple[Path, str]) -> None:
    from raftlog.client import Admin, Consumer, Producer
    from raftlog.testing.local_cluster import LocalCluster

    data, servers = cluster
    local = LocalCluster.load(str(data))
    with Admin(servers) as admin:
        admin.create_topic("t", 1)
        leader = admin.cluster_status().leader_address
    follower = next(n for n in local.nodes.values() if n.address != leader)
    with Producer(servers, timeout_s=30) as producer:
        first = [producer.send("t", f"m{i}".encode()) for i in range(5)]
        local.kill(follower.node_id)
        second = [producer.send("t", f"m{i}".encode()) for i in range(5, 10)]
        local.restart(follower.node_id, wait_timeout_s=60)
    offsets = [r.queue_offset for r in first + second]
    assert offsets == list(range(10))
    with Consumer(servers, "g2", "t", from_beginning=True) as consumer:
        bodies: list[bytes] = []
        for _ in range(20):
            bodies += [m.body for m in consumer.poll(0.5)]
            if len(bodies) >= 10:
                break
    assert bodies == [f"m{i}".encode() for i in range(10)]


def _status_rows(out: str) -> dict[str, dict[str, str]]:
    """NODE -> its row's cells by column name, from `cluster status` output (the table's
    header line starts with NODE)."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header_at = next(i for i, cells in enumerate(lines) if cells[0] == "NODE")
    header = lines[header_at]
    rows = [
        dict(zip(header, cells, strict=False))
        for cells in lines[header_at + 1 :]
        if not cells[0].startswith(("cluster", "leader", "voters"))
    ]
    return {row["NODE"]: row for row in rows}


def test_status_names_each_member_by_its_own_answer(cluster: tuple[Path, str]) -> None:
    """Asked through one follower only, status still finds the leader and every member's lag;
    a killed member's row says down (it never shows another member's answer)."""
    from raftlog.client import Admin
    from raftlog.testing.local_cluster import LocalCluster

    data, servers = cluster
    local = LocalCluster.load(str(data))
    with Admin(servers) as admin:
        leader_id = admin.cluster_status().leader_id
    follower = next(n for n in local.nodes.values() if n.node_id != leader_id)
    code, out, err = cli("cluster", "status", "--servers", follower.address)
    assert code == 0, err
    assert f"leader {leader_id} at " in out
    rows = _status_rows(out)
    assert sorted(rows) == ["n1", "n2", "n3"]
    assert all(row["LAG"] != "-" for node_id, row in rows.items() if node_id != leader_id), out
    local.kill(follower.node_id)
    code, out, err = cli("cluster", "status", "--data-dir", str(data))
    assert code == 0, err
    rows = _status_rows(out)
    assert rows[follower.node_id]["ADDRESS"] == follower.address
    assert rows[follower.node_id]["ROLE"] == "down", out
    roles = [row["ROLE"] for node_id, row in rows.items() if node_id != follower.node_id]
    assert roles.count("leader") == 1, out


def test_cli_master_slave_group(tmp_path: Path) -> None:
    """`cluster up --replication master-slave --static`: a SYNC_MASTER and two slaves as
    processes; a write sent to a slave lands on the master; status shows roles and the in-sync
    set; with both slaves killed the master still stores, and says SLAVE_NOT_AVAILABLE."""
    from raftlog.testing.local_cluster import LocalCluster

    data = str(tmp_path / "ms")
    up = cli(
        "cluster",
        "up",
        "--replication",
        "master-slave",
        "--static",
        "--data-dir",
        data,
        "--base-port",
        "0",
    )
    assert up[0] == 0, up[2]
    local = LocalCluster.load(data)
    try:
        master, slave = local.addresses[0], local.addresses[1]
        assert cli("topic", "create", "orders", "--queues", "1", "--servers", slave)[0] == 0
        code, out, err = cli("produce", "orders", "hi", "--count", "2", "--servers", slave)
        assert (code, out.count("sent "), "NOT_AVAILABLE" in out) == (0, 2, False), err
        code, out, err = cli("cluster", "status", "--data-dir", data)
        assert code == 0, err
        assert "SYNC_MASTER" in out and out.count("SLAVE ") == 2
        assert "master-slave" in out and "in sync n1,n2,n3" in out
        local.kill("n2")
        local.kill("n3")
        code, out, err = cli("produce", "orders", "alone", "--servers", master)
        assert (code, "SLAVE_NOT_AVAILABLE" in out) == (0, True), err
        code, out, _ = cli(
            "consume", "orders", "--group", "g", "--timeout", "2", "--servers", master
        )
        assert [line.rsplit(" ", 1)[-1] for line in out.splitlines()] == ["hi", "hi", "alone"]
    finally:
        local.stop(timeout_s=10)


def test_cli_master_slave_failover(tmp_path: Path) -> None:
    """`cluster up --replication master-slave` with its three controller processes: the
    master is killed with SIGKILL, the controller elects a slave (epoch 2), writes go on, and
    `cluster down` stops the controllers too."""
    from raftlog.testing.local_cluster import LocalCluster
    from raftlog.testing.node_probes import alive

    data = str(tmp_path / "msc")
    up = cli(
        "cluster", "up", "--replication", "master-slave", "--data-dir", data, "--base-port", "0"
    )
    assert up[0] == 0, up[2]
    local = LocalCluster.load(data)
    assert local.controllers is not None
    try:
        servers = ",".join(local.addresses)
        assert cli("topic", "create", "orders", "--queues", "1", "--servers", servers)[0] == 0
        _produce_replicated(servers, "before")  # once the in-sync set has grown
        _, out, _ = cli("cluster", "status", "--data-dir", data)
        assert "epoch 1" in out, out
        master = next(n for n, node in local.nodes.items() if f"master {n} at" in out)
        local.kill(master)
        _produce_replicated(servers, "after")
        _, out, _ = cli("cluster", "status", "--data-dir", data)
        assert "epoch 2" in out and f"master {master} at" not in out, out
        controller_pids = [c.pid for c in local.controllers.members]
    finally:
        cli("cluster", "down", "--data-dir", data)
    assert all(pid is not None and not alive(pid) for pid in controller_pids)


def _produce_replicated(servers: str, body: str, timeout_s: float = 20.0) -> None:
    """`raftlog produce` until a send is acknowledged as replicated (SEND_OK)."""
    deadline = time.monotonic() + timeout_s
    while True:
        code, out, _ = cli("produce", "orders", body, "--servers", servers)
        if code == 0 and "sent " in out and "NOT_AVAILABLE" not in out and "TIMEOUT" not in out:
            return
        assert time.monotonic() < deadline, out
