"""The applied-state checkpoint on a three-node cluster in this process (real gRPC servers,
real files): a restarted member starts applying after its checkpoint instead of replaying the
log from the snapshot point, and what only replay used to rebuild -- the idempotent
producers' sequences -- comes back with it."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from raftlog.node.replication import applied_state
from raftlog.proto import client_pb2
from raftlog.store.filesystem import OsFileSystem
from tests.support.inprocess_cluster import InProcessCluster, running_cluster

TOPIC = "checkpointed"


def produce(cluster: InProcessCluster, body: bytes, sequence: int) -> client_pb2.ProduceResponse:
    request = client_pb2.ProduceRequest(
        topic=TOPIC,
        messages=[client_pb2.ProduceMessage(queue_id=0, body=body)],
        producer_id="checkpointed-producer",
        sequence=sequence,
    )
    return cluster.producer(cluster.leader()).Produce(request, timeout=10)


def checkpoint_path(cluster: InProcessCluster, node_id: str) -> str:
    settings = cluster.nodes[node_id].replica.settings
    return settings.applied_state_path


def test_a_restart_starts_after_the_checkpoint_and_keeps_producer_sequences(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running_cluster(tmp_path) as cluster:
        cluster.create_topic(TOPIC, 1)
        produce(cluster, b"first", 1)
        second = produce(cluster, b"second", 2)
        assert not second.duplicate
        # Housekeeping writes the checkpoint every second, on every member.
        deadline = time.monotonic() + 10
        applied = {n: node.replica.ready.applied_index for n, node in cluster.nodes.items()}
        while time.monotonic() < deadline:
            saved = {
                n: applied_state.load(OsFileSystem(), checkpoint_path(cluster, n))
                for n in cluster.nodes
            }
            if all(s is not None and s.index >= second.raft_index for s in saved.values()):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"no checkpoint at index {second.raft_index} on every member: {applied}")
        with caplog.at_level(logging.INFO, logger="raftlog.node.replication.replica"):
            cluster.restart_all()
            cluster.leader()
        restored = [r.getMessage() for r in caplog.records if "applied state restored" in r.message]
        assert len(restored) == len(cluster.nodes), caplog.text
        # A graceful stop saved the final state: nothing committed was applied again.
        assert "replayed entries" not in caplog.text
        # The producer table came back with it: the retried batch is a duplicate, answered
        # with where it was stored; the next sequence is stored.
        again = produce(cluster, b"second", 2)
        assert again.duplicate
        assert [r.queue_offset for r in again.results] == [r.queue_offset for r in second.results]
        third = produce(cluster, b"third", 3)
        assert not third.duplicate
        assert third.results[0].queue_offset == second.results[0].queue_offset + 1
