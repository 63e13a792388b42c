"""A member that installs a snapshot gets the replicated control state with it: topics,
consumer-group offsets and access rules travel as control records of the Raft log, and once
retention deleted the segments holding them, a member that catches up by segment transfer
cannot apply them any more -- the snapshot must carry the tables.

Two members install a snapshot of a leader whose first segments are gone:
- a new member (``node start --join``, empty data dir): it must hold every topic, offset and
  rule (without the control state it would hold none of them);
- a follower that was down since before some of them changed: its tables must be the
  leader's, not the stale ones it had (a topic grown since, a newer offset, a revoked rule).
Each is asked directly (``address=``); offsets are read from its store files once stopped
(FetchOffsets answers only on the leader).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.client import AclRule, Admin, NotFoundError
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import LocalCluster
from tests.integration.test_failover import leader_address, status, wait_converged
from tests.integration.test_membership import start_joiner, stop, wait_for
from tests.integration.test_segment_transfer import segment_names

SEGMENT_SIZE_BYTES = 64 << 10
NODE_ARGS = (
    "--segment-size-bytes", str(SEGMENT_SIZE_BYTES),
    "--max-body-bytes", str(16 << 10),
    "--file-reserved-hours", "0",
    "--disk-clean-watermark-ratio", "0.0001",
)  # fmt: skip
FILLER_TOPIC = "filler"
BODY_BYTES = 1000
MESSAGES_PER_BATCH = 20
BATCHES = 25  # ~500 KB: about eight 64 KiB segments, the first ones deleted by retention
RETENTION_WAIT_S = 30.0
GROUP = "billing"

EXPECTED_TOPICS = {"orders-eu": 4, "orders-us": 2}
EXPECTED_OFFSETS = {"orders-eu": {"0": 5, "3": 7}, "orders-us": {"1": 2}}
EXPECTED_RULES = [AclRule("alice", "orders-*", ("produce",))]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    running = LocalCluster(str(tmp_path / "data"), base_port=0, extra_args=NODE_ARGS)
    running.start(wait_timeout_s=30)
    try:
        yield running
    finally:
        running.stop()


def commit_offsets(leader: str, offsets: dict[str, dict[str, int]]) -> None:
    with grpc.insecure_channel(leader) as channel:
        client_pb2_grpc.ConsumerStub(channel).CommitOffsets(
            client_pb2.CommitOffsetsRequest(
                group=GROUP,
                offsets=[
                    client_pb2.QueueOffset(topic=topic, queue_id=int(q), queue_offset=offset)
                    for topic, queues in offsets.items()
                    for q, offset in queues.items()
                ],
            ),
            timeout=10,
        )


def produce_filler(leader: str) -> None:
    with grpc.insecure_channel(leader) as channel:
        producer = client_pb2_grpc.ProducerStub(channel)
        for batch in range(BATCHES):
            producer.Produce(
                client_pb2.ProduceRequest(
                    topic=FILLER_TOPIC,
                    messages=[
                        client_pb2.ProduceMessage(queue_id=0, body=b"%d-%d-" % (batch, i) * 100)
                        for i in range(MESSAGES_PER_BATCH)
                    ],
                ),
                timeout=10,
            )


def stored_offsets(data_dir: Path) -> dict[str, dict[str, int]]:
    path = data_dir / "store" / "config" / "consumer_offsets.json"
    if not path.exists():
        return {}
    offsets: dict[str, dict[str, dict[str, int]]] = json.loads(path.read_text())["offsets"]
    return offsets.get(GROUP, {})


def control_state_of(admin: Admin, address: str) -> tuple[dict[str, int], list[AclRule]]:
    """The user topics and access rules the member at ``address`` holds."""
    topics = {}
    for topic in EXPECTED_TOPICS:
        try:
            topics[topic] = admin.describe_topic(topic, address=address).topic.queue_count
        except NotFoundError:
            continue  # the member lacks it
    return topics, admin.list_acls(address=address)


def test_a_member_that_installs_a_snapshot_holds_the_leaders_control_state(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    servers = cluster.addresses
    leader = leader_address(cluster)
    leader_id = next(n for n, node in cluster.nodes.items() if node.address == leader)
    follower = next(n for n in cluster.nodes if n != leader_id)
    with Admin(servers) as admin:
        # The state the follower will have seen: since outgrown, overwritten, revoked.
        admin.create_topic("orders-eu", 2)
        commit_offsets(leader, {"orders-eu": {"0": 1}})
        admin.grant_acl("bob", "orders-eu", ["consume"])
        wait_converged(cluster)
        cluster.stop_node(follower)

        admin.create_topic("orders-eu", 4)
        admin.create_topic("orders-us", 2)
        admin.create_topic(FILLER_TOPIC, 1)
        commit_offsets(leader, EXPECTED_OFFSETS)
        admin.grant_acl("alice", "orders-*", ["produce"])
        admin.revoke_acl("bob", "orders-eu")
        produce_filler(leader)
        # Retention (every few seconds) compacts the log over the first segments, which hold
        # every control record above, and deletes them.
        leader_dir = Path(cluster.nodes[leader_id].data_dir)
        deadline = time.monotonic() + RETENTION_WAIT_S
        while segment_names(str(leader_dir))[0] == "0" * 20:
            assert time.monotonic() < deadline, "retention deleted nothing on the leader"
            time.sleep(0.5)

        joiner, joiner_address = start_joiner(tmp_path, "n4", servers, *NODE_ARGS)
        try:
            cluster.restart(follower)
            target = status(leader).applied_index
            members = {"n4": joiner_address, follower: cluster.nodes[follower].address}
            for address in members.values():
                wait_for(
                    lambda a=address: admin.cluster_status(address=a).applied_index >= target,
                    f"{address} to catch up",
                )
            held = {node_id: control_state_of(admin, a) for node_id, a in members.items()}
        finally:
            stop(joiner)
        cluster.stop_node(follower)
    data_dirs = {"n4": tmp_path / "n4", follower: Path(cluster.nodes[follower].data_dir)}
    for node_id, data_dir in data_dirs.items():
        assert "installed snapshot" in (data_dir / "node.log").read_text(), node_id
    assert {n: (*held[n], stored_offsets(d)) for n, d in data_dirs.items()} == {
        n: (EXPECTED_TOPICS, EXPECTED_RULES, EXPECTED_OFFSETS) for n in data_dirs
    }
