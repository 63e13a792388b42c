"""The Prometheus endpoint of real node processes (a LocalCluster with metrics on): produce,
pull and commit through the raw gRPC API, scrape every node over HTTP, parse the text with
prometheus_client's own parser, and check the values against what was done; plus the two ways
a bad ``--metrics-listen`` stops a node (malformed: exit 2; taken: exit 1), each one line."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import LocalCluster

pytestmark = pytest.mark.integration

TOPIC = "metered"
GROUP = "readers"
Scrape = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Scrape:
    """Every sample of the endpoint, by (sample name, labels)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Scrape, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def label_values(samples: Scrape, name: str, label: str) -> set[str]:
    return {dict(key)[label] for sample, key in samples if sample == name and label in dict(key)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    running = LocalCluster(str(tmp_path_factory.mktemp("metrics")), 3, 0, metrics=True)
    running.start(60)
    try:
        yield running
    finally:
        running.stop()


def _node_of(cluster: LocalCluster, address: str) -> str:
    return next(n.node_id for n in cluster.nodes.values() if n.address == address)


def _traffic(leader: str, follower: str) -> None:
    """12 messages (5 single sends to queue 0, a batch of 7 to queue 1), one send refused by a
    follower, both queues pulled (fields and records), and a commit leaving a lag of 2."""
    with grpc.insecure_channel(leader) as channel, grpc.insecure_channel(follower) as other:
        admin = client_pb2_grpc.AdminStub(channel)
        admin.CreateTopic(client_pb2.CreateTopicRequest(topic=TOPIC, queue_count=2), timeout=10)
        producer = client_pb2_grpc.ProducerStub(channel)
        for i in range(5):
            message = client_pb2.ProduceMessage(queue_id=0, body=f"m{i}".encode())
            producer.Produce(client_pb2.ProduceRequest(topic=TOPIC, messages=[message]), timeout=10)
        batch = [client_pb2.ProduceMessage(queue_id=1, body=b"b") for _ in range(7)]
        producer.Produce(client_pb2.ProduceRequest(topic=TOPIC, messages=batch), timeout=10)
        with pytest.raises(grpc.RpcError) as refused:
            client_pb2_grpc.ProducerStub(other).Produce(
                client_pb2.ProduceRequest(topic=TOPIC, messages=batch[:1]), timeout=10
            )
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        consumer = client_pb2_grpc.ConsumerStub(channel)
        pulled = consumer.Pull(client_pb2.PullRequest(topic=TOPIC, queue_id=0), timeout=10)
        as_records = client_pb2.PullRequest(topic=TOPIC, queue_id=1, return_records=True)
        assert (len(pulled.messages), consumer.Pull(as_records, timeout=10).record_count) == (5, 7)
        offsets = [
            client_pb2.QueueOffset(topic=TOPIC, queue_id=0, queue_offset=3),
            client_pb2.QueueOffset(topic=TOPIC, queue_id=1, queue_offset=7),
        ]
        consumer.CommitOffsets(client_pb2.CommitOffsetsRequest(group=GROUP, offsets=offsets))


def _converged(cluster: LocalCluster, timeout_s: float = 20.0) -> dict[str, Scrape]:
    """Every node's scrape once all applied the same index (the commit is the last entry)."""
    scrapes: dict[str, Scrape] = {}
    for _ in range(int(timeout_s / 0.2)):
        scrapes = {n: scrape(str(cluster.metrics_url(n))) for n in cluster.nodes}
        applied = {value(s, "raftlog_raft_applied_index") for s in scrapes.values()}
        lags = {
            value(s, "raftlog_consumer_group_lag_messages", group=GROUP, topic=TOPIC, queue="0")
            for s in scrapes.values()
        }
        if len(applied) == 1 and lags == {2.0}:
            return scrapes
        time.sleep(0.2)
    pytest.fail(f"the nodes did not converge: {scrapes}")


def test_each_node_reports_what_was_done(cluster: LocalCluster) -> None:
    leader = cluster.leader_address()
    assert leader is not None
    leader_id = _node_of(cluster, leader)
    follower_id = next(n for n in cluster.nodes if n != leader_id)
    _traffic(leader, cluster.nodes[follower_id].address)
    scrapes = _converged(cluster)
    _check_requests(scrapes[leader_id], scrapes[follower_id])
    _check_raft(scrapes, leader_id)
    for samples in scrapes.values():
        _check_store(samples)


def _check_requests(on_leader: Scrape, on_follower: Scrape) -> None:
    produce = {"grpc_service": "raftlog.v1.Producer", "grpc_method": "Produce"}
    assert value(on_leader, "raftlog_produce_messages_total") == 12
    assert value(on_leader, "raftlog_pull_messages_total") == 12
    assert value(on_leader, "raftlog_grpc_server_handled_total", **produce, grpc_code="OK") == 6
    assert value(on_leader, "raftlog_grpc_server_handling_seconds_count", **produce) == 6
    refused = value(
        on_follower, "raftlog_grpc_server_handled_total", **produce, grpc_code="FAILED_PRECONDITION"
    )
    assert refused == 1
    assert value(on_follower, "raftlog_produce_messages_total") == 0


def _check_raft(scrapes: Mapping[str, Scrape], leader_id: str) -> None:
    for node_id, samples in scrapes.items():
        assert value(samples, "raftlog_raft_role", role="leader") == (
            1 if node_id == leader_id else 0
        )
        assert value(samples, "raftlog_raft_leader_known") == 1
        assert (
            value(
                samples,
                "raftlog_node_info",
                node_id=node_id,
                cluster_id="raftlog",
                replication="raft",
            )
            == 1
        )
    for name in ("raftlog_raft_term", "raftlog_raft_commit_index", "raftlog_raft_applied_index"):
        assert len({value(s, name) for s in scrapes.values()}) == 1, name
    on_leader = scrapes[leader_id]
    followers = set(scrapes) - {leader_id}
    assert label_values(on_leader, "raftlog_raft_follower_lag_entries", "follower") == followers
    assert all(
        value(on_leader, "raftlog_raft_follower_lag_entries", follower=f) == 0 for f in followers
    )
    assert all(
        not label_values(scrapes[f], "raftlog_raft_follower_lag_entries", "follower")
        for f in followers
    )


def _check_store(samples: Scrape) -> None:
    assert value(samples, "raftlog_queue_max_offset", topic=TOPIC, queue="0") == 5
    assert value(samples, "raftlog_queue_max_offset", topic=TOPIC, queue="1") == 7
    assert value(samples, "raftlog_queue_min_offset", topic=TOPIC, queue="0") == 0
    assert value(samples, "raftlog_consumer_group_offset", group=GROUP, topic=TOPIC, queue="0") == 3
    lag = value(samples, "raftlog_consumer_group_lag_messages", group=GROUP, topic=TOPIC, queue="1")
    assert lag == 0
    # The node's own control topic is not a user's queue.
    assert label_values(samples, "raftlog_queue_max_offset", "topic") == {TOPIC}
    assert (value(samples, "raftlog_store_fsync_duration_seconds_count") or 0) > 0
    assert (value(samples, "raftlog_store_commitlog_segments") or 0) >= 1
    assert value(samples, "raftlog_store_commitlog_bytes") == value(
        samples, "raftlog_store_commitlog_max_offset_bytes"
    )


def test_cluster_status_shows_each_node_metrics_url(cluster: LocalCluster) -> None:
    for node_id, node in cluster.nodes.items():
        with grpc.insecure_channel(node.address) as channel:
            status = client_pb2_grpc.AdminStub(channel).ClusterStatus(
                client_pb2.ClusterStatusRequest(), timeout=5
            )
        urls = {m.node_id: m.metrics_url for m in status.members}
        # A node knows its own endpoint only.
        assert urls == {n: (cluster.metrics_url(n) if n == node_id else "") for n in cluster.nodes}
    done = _cli("cluster", "status", "--data-dir", cluster.base_dir)
    assert done.returncode == 0, done.stderr
    header, *lines = done.stdout.splitlines()
    assert header.split()[-1] == "METRICS"
    rows = {line.split()[0]: line.split()[-1] for line in lines if not line.startswith("cluster")}
    assert rows == {n: cluster.metrics_url(n) for n in cluster.nodes}


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftlog.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _node_start(tmp_path: Path, metrics_listen: str) -> subprocess.CompletedProcess[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    return _cli(
        "node",
        "start",
        "--node-id",
        "n1",
        "--listen",
        address,
        "--peers",
        f"n1={address}",
        "--data-dir",
        str(tmp_path / "n1"),
        "--metrics-listen",
        metrics_listen,
    )


@pytest.mark.parametrize("metrics_listen", ["localhost", "127.0.0.1:99999", "bad host:9701"])
def test_a_malformed_metrics_listen_is_a_usage_error(tmp_path: Path, metrics_listen: str) -> None:
    done = _node_start(tmp_path, metrics_listen)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"raftlog: metrics_listen: {metrics_listen!r}")
    assert "(from --metrics-listen)" in done.stderr


def test_a_taken_metrics_port_stops_the_node_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = _node_start(tmp_path, address)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"raftlog: metrics_listen: cannot listen on {address}: "), done.stderr
    assert "Traceback" not in done.stderr


def _in_sync(url: str, slave: str, timeout_s: float = 20.0) -> None:
    for _ in range(int(timeout_s / 0.2)):
        if value(scrape(url), "raftlog_masterslave_slave_in_sync", slave=slave) == 1:
            return
        time.sleep(0.2)
    pytest.fail(f"{slave} never joined the in-sync set ({url})")


def test_master_reports_its_role_epoch_and_each_slave_lag(tmp_path: Path) -> None:
    """A static master-slave pair: the master's endpoint says it is the master and how far
    its slave is behind, in bytes and seconds; the slave's says it is a slave."""
    group = LocalCluster(str(tmp_path), 2, 0, replication="master-slave", metrics=True)
    with group:
        group.start(60)
        _in_sync(str(group.metrics_url("n1")), "n2")
        with grpc.insecure_channel(group.nodes["n1"].address) as channel:
            client_pb2_grpc.AdminStub(channel).CreateTopic(
                client_pb2.CreateTopicRequest(topic=TOPIC, queue_count=1), timeout=10
            )
            message = client_pb2.ProduceMessage(queue_id=0, body=b"synced")
            sent = client_pb2_grpc.ProducerStub(channel).Produce(
                client_pb2.ProduceRequest(topic=TOPIC, messages=[message]), timeout=10
            )
        assert sent.send_status == client_pb2.SEND_STATUS_OK
        master, slave = (scrape(str(group.metrics_url(n))) for n in ("n1", "n2"))
    assert value(master, "raftlog_masterslave_role", role="master") == 1
    assert value(slave, "raftlog_masterslave_role", role="slave") == 1
    assert value(master, "raftlog_masterslave_epoch") == value(slave, "raftlog_masterslave_epoch")
    # A SYNC_MASTER acknowledged the write once its slave held it: nothing is missing.
    assert value(master, "raftlog_masterslave_slave_lag_bytes", slave="n2") == 0
    assert value(master, "raftlog_masterslave_slave_lag_seconds", slave="n2") == 0
    assert value(master, "raftlog_masterslave_slave_in_sync", slave="n2") == 1
    assert not label_values(slave, "raftlog_masterslave_slave_lag_bytes", "slave")
    info = {"cluster_id": "raftlog", "replication": "master-slave"}
    assert value(master, "raftlog_node_info", node_id="n1", **info) == 1
    assert value(master, "raftlog_queue_max_offset", topic=TOPIC, queue="0") == 1
