"""An old leader that was partitioned away while it still took writes rejoins a majority that
committed past the point where their logs diverge.

Its uncommitted tail must be replaced, in one APPEND that also carries a commit index beyond
the divergence point. The old leader must take that, not stop: found by a container chaos run,
where the Raft log's truncation guard compared the entries being replaced with the commit
index of the very Ready that replaced them and stopped the node. Real node processes on
127.0.0.1; the partition refuses every connection to and from the leader
(chaos/link_proxy.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest

from raftlog.chaos.local_target import LocalTarget
from raftlog.chaos.target import leader_of, partition_links, wait_converged
from raftlog.client import Admin, Producer
from raftlog.proto import client_pb2, client_pb2_grpc

pytestmark = pytest.mark.integration

TOPIC = "rejoin"
STRANDED_WRITES = 8
MAJORITY_WRITES = 50
CONVERGE_TIMEOUT_S = 30.0


def _wait_for_new_leader(target: LocalTarget, old: str, timeout_s: float) -> str:
    for _ in range(int(timeout_s / 0.2)):
        views = [target.status(n) for n in target.node_ids() if n != old]
        leaders = [v.node_id for v in views if v is not None and v.role == "leader"]
        if leaders:
            return leaders[0]
        time.sleep(0.2)
    raise AssertionError(f"no new leader without {old} within {timeout_s} s")


def test_partitioned_leader_with_a_stranded_tail_rejoins(tmp_path: Path) -> None:
    target = LocalTarget(tmp_path / "cluster", partitions=True)
    target.start()
    try:
        with target.connect() as connection, Admin(connection) as admin:
            admin.create_topic(TOPIC, 2)
        with target.connect() as connection, Producer(connection) as producer:
            for number in range(10):
                producer.send(TOPIC, f"before-{number}".encode())
        found = leader_of(target)
        assert found is not None
        old_leader = found[0]
        others = [n for n in target.node_ids() if n != old_leader]
        # Refused, not silent: a blackhole would hold the new leader's first APPEND (sent
        # before it committed anything) and deliver it first on the heal; this way the first
        # APPEND after the heal carries the majority's current commit index.
        target.block(partition_links(target.node_ids(), [[old_leader], others]), silent=False)

        # Writes to the isolated leader: it appends them, but no majority can commit them.
        with grpc.insecure_channel(target.address_of(old_leader)) as channel:
            stub = client_pb2_grpc.ProducerStub(channel)
            stranded = [
                stub.Produce.future(
                    client_pb2.ProduceRequest(
                        topic=TOPIC,
                        messages=[client_pb2.ProduceMessage(body=f"stranded-{n}".encode())],
                    ),
                    timeout=1.0,
                )
                for n in range(STRANDED_WRITES)
            ]
            outcomes = [f.exception() for f in stranded]
        assert all(o is not None for o in outcomes), "a write on the isolated leader succeeded"

        new_leader = _wait_for_new_leader(target, old_leader, timeout_s=20.0)
        with grpc.insecure_channel(target.address_of(new_leader)) as channel:
            stub = client_pb2_grpc.ProducerStub(channel)
            for number in range(MAJORITY_WRITES):
                stub.Produce(
                    client_pb2.ProduceRequest(
                        topic=TOPIC,
                        messages=[client_pb2.ProduceMessage(body=f"after-{number}".encode())],
                    ),
                    timeout=5.0,
                )

        target.heal()
        converged = wait_converged(target, CONVERGE_TIMEOUT_S)
        assert target.pid_of(old_leader) is not None, (
            f"{old_leader} stopped on rejoining:\n{target.log_tail(old_leader)}"
        )
        assert converged is not None, "the replicas did not converge after the heal"
        digests = {target.read_replica(n, TOPIC).commitlog_digest for n in target.node_ids()}
        assert len(digests) == 1, f"committed logs differ after the rejoin: {digests}"
        bodies = {
            value
            for queue in target.read_replica(old_leader, TOPIC).queues.values()
            for _, value in queue
        }
        assert not any(b.startswith("stranded-") for b in bodies), "an uncommitted write survived"
        assert {f"after-{n}" for n in range(MAJORITY_WRITES)} <= bodies
    finally:
        target.close()
