"""A static master-slave group of raftlog:dev containers (n1 a SYNC_MASTER, n2 and n3 its
slaves) on its own Docker network, driven from the host: writes through the typed client
land on the master (also when sent to a slave), the slaves' CommitLogs are byte-identical
(``sha256sum`` in each container), and with both slaves cut off by a network disconnect the
master still stores and says the write is not replicated, then SEND_OK once one is back.

The same group under its controller (three controller members in containers beside the
brokers): the controller elects a master; SIGKILL of the master's container is followed by
another master acknowledging writes within seconds, with every acknowledged write kept, and the
old master, started again, follows and ends byte-identical."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from raftlog.testing import RaftlogCluster

from .conftest import _RUN_IDS

pytestmark = pytest.mark.containers

TOPIC = "orders"


@pytest.fixture
def group(raftlog_image: str) -> Iterator[RaftlogCluster]:
    running = RaftlogCluster(
        raftlog_image,
        replication="master-slave",
        master_role="SYNC_MASTER",
        env={"RAFTLOG_SYNC_FLUSH_TIMEOUT_MS": "1000"},
    )
    _RUN_IDS.append(running.run_id)
    with running:
        yield running


def _wait_identical(group: RaftlogCluster, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        sums = {n: group.commitlog_checksums(n) for n in group.node_ids}
        if len(set(sums.values())) == 1:
            return sums["n1"]
        assert time.monotonic() < deadline, f"the replicas differ: {sums}"
        time.sleep(0.25)


def test_a_sync_master_group_in_containers(group: RaftlogCluster) -> None:
    with group.admin() as admin:
        admin.create_topic(TOPIC, 2)
        status = admin.cluster_status(address="n2:7701")
    assert (status.replication, status.leader_id, status.broker_role) == (
        "master-slave",
        "n1",
        "SLAVE",
    )
    with group.producer() as producer:
        results = [producer.send(TOPIC, b"m%03d" % i) for i in range(30)]
    assert {r.send_status for r in results} == {"SEND_OK"}
    assert _wait_identical(group)
    group.disconnect("n2")
    group.disconnect("n3")
    try:
        with group.producer() as producer:
            alone = producer.send(TOPIC, b"only on n1")
        # Stored on n1 either way: SLAVE_NOT_AVAILABLE once the slaves left the in-sync set,
        # FLUSH_SLAVE_TIMEOUT while they still count (they answered nothing in time).
        assert alone.send_status in {"SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT"}
    finally:
        group.reconnect("n2")
        group.reconnect("n3")
    deadline = time.monotonic() + 30
    status_now = ""
    with group.producer() as producer:
        while status_now != "SEND_OK":
            assert time.monotonic() < deadline, "no slave came back in sync within 30 s"
            status_now = producer.send(TOPIC, b"back").send_status
            time.sleep(0.2)
    assert _wait_identical(group)


@pytest.fixture
def controlled_group(raftlog_image: str) -> Iterator[RaftlogCluster]:
    running = RaftlogCluster(
        raftlog_image, replication="master-slave", master_role="SYNC_MASTER", controlled=True
    )
    _RUN_IDS.append(running.run_id)
    with running:
        yield running


def _send_ok(group: RaftlogCluster, body: bytes, timeout_s: float = 30.0) -> str:
    """Send until SEND_OK; the node that answered it is returned as the master."""
    deadline = time.monotonic() + timeout_s
    with group.producer(timeout_s=5) as producer:
        while True:
            try:
                if producer.send(TOPIC, body).send_status == "SEND_OK":
                    break
            except Exception:  # an election under way: bounded by the deadline
                pass
            assert time.monotonic() < deadline, "no SEND_OK within the deadline"
            time.sleep(0.1)
    master, _ = group.wait_for_leader(timeout_s=10)
    return master


def test_a_controlled_group_fails_over_in_containers(controlled_group: RaftlogCluster) -> None:
    group = controlled_group
    with group.admin() as admin:
        admin.create_topic(TOPIC, 1)
    first = _send_ok(group, b"warm-up")
    acked = [b"warm-up"]
    with group.producer() as producer:
        for i in range(20):
            assert producer.send(TOPIC, b"before %d" % i).send_status == "SEND_OK"
            acked.append(b"before %d" % i)
    killed_at = time.monotonic()
    group.kill(first)
    deadline = time.monotonic() + 30
    while (second := group.wait_for_leader(exclude=first, timeout_s=30)[0]) == first:
        assert time.monotonic() < deadline
    _send_ok(group, b"after")
    failover_s = time.monotonic() - killed_at
    acked.append(b"after")
    print(f"master {first} killed -> first SEND_OK on {second} after {failover_s:.2f} s")
    assert failover_s < 15
    with group.consumer("audit", TOPIC, from_beginning=True, max_messages=100) as consumer:
        bodies = [m.body for m in consumer.poll(timeout_s=5)]
    assert set(acked) <= set(bodies)
    group.start_node(first)  # the old master comes back as a slave of the new one
    assert _wait_identical(group, timeout_s=60)
