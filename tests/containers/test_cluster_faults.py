"""A raftlog:dev cluster in Docker under faults, driven from the host through published ports.

Each test runs an idempotent producer from the host while one fault hits the leader, heals
it, and checks: no acknowledged message is lost or stored twice, every queue's offsets are
dense and identical on every replica, and the replicas' CommitLog files are byte-identical
(``sha256sum`` inside each container after convergence)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from raftlog.chaos.target import read_queues
from raftlog.client import RaftlogError
from raftlog.testing import ClusterError, RaftlogCluster

pytestmark = pytest.mark.containers

TOPIC = "events"
QUEUES = 4
FAULT_S = 6.0
NEW_LEADER_WITHIN_S = 30.0


class Writer:
    """Sends unique bodies one at a time with an idempotent producer until stopped; records
    which were acknowledged and which ended with an error (outcome unknown)."""

    def __init__(self, cluster: RaftlogCluster) -> None:
        self._producer = cluster.producer(timeout_s=60.0, attempt_timeout_s=3.0, max_attempts=60)
        self.acked: list[bytes] = []
        self.unknown: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            number += 1
            body = b"m-%06d" % number
            try:
                self._producer.send(TOPIC, body)
            except RaftlogError:
                self.unknown.append(body)
            else:
                self.acked.append(body)
            time.sleep(0.01)

    def wait_acks(self, count: int, timeout_s: float = 60.0) -> None:
        target = len(self.acked) + count
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < target:
            assert time.monotonic() < deadline, f"fewer than {count} acks in {timeout_s} s"
            time.sleep(0.05)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        self._producer.close()
        self._producer.connection.close()


@contextmanager
def writing(cluster: RaftlogCluster) -> Iterator[Writer]:
    with cluster.admin() as admin:
        admin.create_topic(TOPIC, QUEUES)
    with Writer(cluster) as writer:
        writer.wait_acks(20)
        yield writer
        writer.wait_acks(20)


def check(cluster: RaftlogCluster, writer: Writer) -> None:
    """No acknowledged message lost, none stored twice, dense identical offsets, identical
    CommitLog bytes on every replica."""
    cluster.wait_converged(timeout_s=90)
    replicas = {
        node_id: read_queues(cluster.address_map[f"{node_id}:7701"], TOPIC)
        for node_id in cluster.node_ids
    }
    reference = replicas[cluster.node_ids[0]]
    for node_id, queues in replicas.items():
        assert queues == reference, f"{node_id}'s queues differ from {cluster.node_ids[0]}'s"
        for key, entries in queues.items():
            offsets = [offset for offset, _ in entries]
            assert offsets == list(range(len(offsets))), f"{node_id} {key}: offsets not dense"
    bodies = [body.encode() for entries in reference.values() for _, body in entries]
    assert len(bodies) == len(set(bodies)), "a message is stored twice"
    lost = set(writer.acked) - set(bodies)
    assert not lost, f"{len(lost)} acknowledged messages lost: {sorted(lost)[:5]}"
    assert len(writer.acked) >= 40
    sums = {node_id: cluster.commitlog_checksums(node_id) for node_id in cluster.node_ids}
    assert len(set(sums.values())) == 1, f"CommitLog files differ: {sums}"
    print(
        f"\n{len(writer.acked)} acked, {len(writer.unknown)} unknown, {len(bodies)} stored; "
        f"commitlog: {next(iter(sums.values())).strip()}"
    )


def test_produce_and_consume_from_the_host(cluster: RaftlogCluster) -> None:
    with writing(cluster) as writer:
        pass
    with cluster.consumer("readers", TOPIC, from_beginning=True) as consumer:
        received: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(received) < len(writer.acked) and time.monotonic() < deadline:
            received += [m.body for m in consumer.poll(timeout_s=1.0)]
        consumer.commit()
    assert sorted(received) == sorted(writer.acked)
    check(cluster, writer)


def test_kill_the_leader(cluster: RaftlogCluster) -> None:
    with writing(cluster) as writer:
        leader, _ = cluster.wait_for_leader()
        cluster.kill(leader)
        cluster.wait_for_leader(exclude=leader, timeout_s=NEW_LEADER_WITHIN_S)
        writer.wait_acks(20)
        cluster.start_node(leader)
    check(cluster, writer)


def test_pause_the_leader(cluster: RaftlogCluster) -> None:
    with writing(cluster) as writer:
        leader, _ = cluster.wait_for_leader()
        cluster.pause(leader)
        try:
            cluster.wait_for_leader(exclude=leader, timeout_s=NEW_LEADER_WITHIN_S)
            writer.wait_acks(20)
        finally:
            cluster.unpause(leader)
    check(cluster, writer)


def test_partition_the_leader_by_network_disconnect(cluster: RaftlogCluster) -> None:
    with writing(cluster) as writer:
        leader, _ = cluster.wait_for_leader()
        cluster.disconnect(leader)
        try:
            cluster.wait_for_leader(exclude=leader, timeout_s=NEW_LEADER_WITHIN_S)
            writer.wait_acks(20)
            time.sleep(FAULT_S)
        finally:
            cluster.reconnect(leader)
        cluster.wait_answers(leader)
    check(cluster, writer)


def test_silent_one_way_drop_with_iptables(cluster: RaftlogCluster) -> None:
    """In the leader's network namespace, drop every packet from its peers: the followers'
    answers (and connects) vanish silently, nothing is refused."""
    with writing(cluster) as writer:
        leader, _ = cluster.wait_for_leader()
        peers = [n for n in cluster.node_ids if n != leader]
        rules = []
        try:
            for peer in peers:
                rules.append(cluster.drop_from(leader, peer))
        except ClusterError as error:
            for rule in rules:
                cluster.undrop(leader, rule)
            pytest.skip(f"iptables in the container's namespace is unavailable: {error}")
        try:
            cluster.wait_for_leader(exclude=leader, timeout_s=NEW_LEADER_WITHIN_S)
            writer.wait_acks(20)
            time.sleep(FAULT_S)
        finally:
            for rule in rules:
                cluster.undrop(leader, rule)
    check(cluster, writer)


def test_restart_a_container_with_its_volume(cluster: RaftlogCluster) -> None:
    with writing(cluster) as writer:
        leader, _ = cluster.wait_for_leader()
        before = cluster.commitlog_checksums(leader)
        cluster.restart(leader)
        writer.wait_acks(20)
    check(cluster, writer)
    # The restarted node kept its data: its CommitLog still starts with the same file.
    assert before.split()[1] in cluster.commitlog_checksums(leader)
