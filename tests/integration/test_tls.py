"""TLS on both ports (docs/security.md), on a LocalCluster of real processes with a
development CA: the typed client produces and consumes over mTLS; a client trusting another
CA is refused; a peer whose certificate names another node id is refused on the peer port
(and the term stays); a replaced certificate is served to new connections without restart.
"""

from __future__ import annotations

import os
import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from raftlog.client import Admin, ClientTls, Connection, Consumer, Producer, RaftlogError
from raftlog.node.peer.codec import encode_message
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.raft.types import Message, MessageType
from raftlog.testing.dev_ca import init_ca, issue
from raftlog.testing.local_cluster import LocalCluster

TOPIC = "secure"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base: Path = tmp_path_factory.mktemp("tls")
    running = LocalCluster(str(base / "data"), base_port=0, tls=True)
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def test_the_typed_client_produces_and_consumes_over_mtls(cluster: LocalCluster) -> None:
    with Connection(cluster.addresses, tls=cluster.client_tls) as connection:
        Admin(connection).create_topic(TOPIC, 1)
        Producer(connection).send(TOPIC, b"over tls")
        consumer = Consumer(connection, "g1", TOPIC)
        bodies = [m.body for m in consumer.poll(timeout_s=5.0)]
    assert bodies == [b"over tls"]


def test_a_client_of_another_ca_or_without_a_certificate_is_refused(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    other = str(tmp_path / "other-ca")
    init_ca(other)
    cert, key = issue(other, "mallory")
    with pytest.raises(RaftlogError):
        Admin(
            Connection(cluster.addresses, tls=ClientTls(f"{other}/ca.pem", cert, key)), timeout_s=3
        ).cluster_status()
    assert cluster.client_tls is not None
    no_cert = ClientTls(cluster.client_tls.ca_file)
    with pytest.raises(RaftlogError):
        Admin(Connection(cluster.addresses, tls=no_cert), timeout_s=3).cluster_status()


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def _peer_stub_as(cluster: LocalCluster, name: str) -> tuple[grpc.Channel, object]:
    """A channel to n1's peer port presenting a certificate of the cluster's CA for ``name``."""
    cert, key = issue(cluster.tls_dir, name, file_name=f"peer-{name}")
    credentials = grpc.ssl_channel_credentials(
        _read(f"{cluster.tls_dir}/ca.pem"), _read(key), _read(cert)
    )
    channel = grpc.secure_channel(
        cluster.nodes["n1"].peer_address,
        credentials,
        options=[("grpc.ssl_target_name_override", "n1")],
    )
    return channel, peer_pb2_grpc.RaftPeerStub(channel)  # type: ignore[no-untyped-call]


def test_a_peer_certificate_naming_another_node_is_refused(cluster: LocalCluster) -> None:
    with Admin(Connection(cluster.addresses, tls=cluster.client_tls)) as admin:
        before = admin.cluster_status().term
        vote = Message(MessageType.VOTE, "n2", "n1", before + 1000, log_term=10**6, log_index=10**9)
        batch = peer_pb2.RaftMessageBatch(cluster_id="raftlog", messages=[encode_message(vote)])
        channel, stub = _peer_stub_as(cluster, "n3")  # a real member's cert, speaking as n2
        with channel, pytest.raises(grpc.RpcError) as refused:
            list(stub.Messages(iter([batch]), timeout=5))  # type: ignore[attr-defined]
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert admin.cluster_status().term == before


def _served_serial(cluster: LocalCluster) -> int:
    host, port = cluster.nodes["n2"].address.rsplit(":", 1)
    pem = ssl.get_server_certificate((host, int(port)))
    return x509.load_pem_x509_certificate(pem.encode()).serial_number


def test_a_replaced_certificate_is_served_without_restart(cluster: LocalCluster) -> None:
    before = _served_serial(cluster)
    # Issue anew for n2 elsewhere, then swap the files in (as a rotation would).
    staging = os.path.join(cluster.tls_dir, "staging")
    os.makedirs(staging, exist_ok=True)
    for name in ("ca.pem", "ca.key"):
        shutil.copy(os.path.join(cluster.tls_dir, name), staging)
    cert, key = issue(staging, "n2")
    os.replace(key, os.path.join(cluster.tls_dir, "n2.key"))
    os.replace(cert, os.path.join(cluster.tls_dir, "n2.pem"))
    new_serial = x509.load_pem_x509_certificate(
        _read(os.path.join(cluster.tls_dir, "n2.pem"))
    ).serial_number
    assert _served_serial(cluster) == new_serial != before
    with Admin(Connection([cluster.nodes["n2"].address], tls=cluster.client_tls)) as admin:
        assert admin.cluster_status().node_id == "n2"


@pytest.fixture(scope="module")
def ms_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base: Path = tmp_path_factory.mktemp("tls-ms")
    running = LocalCluster(str(base / "data"), base_port=0, tls=True, replication="master-slave")
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def test_the_ha_stream_takes_only_the_slave_its_certificate_names(
    ms_cluster: LocalCluster,
) -> None:
    channel, _ = _peer_stub_as(ms_cluster, "n3")  # a real slave's cert, claiming to be n2
    stub = peer_pb2_grpc.HaPeerStub(channel)  # type: ignore[no-untyped-call]
    report = peer_pb2.SlaveReport(cluster_id="raftlog", broker_name="broker-a", node_id="n2")
    with channel, pytest.raises(grpc.RpcError) as refused:
        list(stub.Replicate(iter([report]), timeout=5))
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "does not name 'n2'" in (refused.value.details() or "")
    with Producer(Connection(ms_cluster.addresses, tls=ms_cluster.client_tls)) as producer:
        Admin(producer.connection).create_topic(TOPIC, 1)
        assert producer.send(TOPIC, b"still replicated").send_status == "SEND_OK"
