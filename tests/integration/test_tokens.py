"""Bearer tokens on the client port (node setting auth_tokens_file): a 3-node cluster whose
nodes accept one client's token. The typed client with that token produces and consumes;
without one, or with an unknown one, every call answers UNAUTHENTICATED and nothing is
written; health stays open for probes; the CLI takes the token from --token-file or
RAFTLOG_TOKEN; a malformed tokens file refuses the node's start in one line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from raftlog.client import Admin, Connection, Consumer, Producer
from raftlog.client.errors import RaftlogError
from raftlog.testing.local_cluster import LocalCluster
from raftlog.testing.node_probes import free_port

TOKEN = "orders-0123456789abcdef"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("tokens-cluster")
    running = LocalCluster(str(base / "data"), base_port=0, auth_token=TOKEN)
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def test_a_known_token_reads_and_writes(cluster: LocalCluster) -> None:
    with Connection(cluster.addresses, token=TOKEN) as connection:
        with Admin(connection) as admin:
            admin.create_topic("secured", 1)
        with Producer(connection) as producer:
            producer.send("secured", b"with a token")
        with Consumer(connection, group="g", topic="secured", from_beginning=True) as consumer:
            assert [m.body for m in consumer.poll(timeout_s=5.0)] == [b"with a token"]


@pytest.mark.parametrize("token", [None, "unknown-0123456789abcdef"], ids=["none", "unknown"])
def test_no_or_an_unknown_token_is_unauthenticated(
    cluster: LocalCluster, token: str | None
) -> None:
    channel = grpc.insecure_channel(cluster.addresses[0])
    metadata = [] if token is None else [("authorization", f"Bearer {token}")]
    try:
        from raftlog.proto import client_pb2, client_pb2_grpc

        stub = client_pb2_grpc.ProducerStub(channel)
        request = client_pb2.ProduceRequest(
            topic="secured", messages=[client_pb2.ProduceMessage(body=b"intruder")]
        )
        with pytest.raises(grpc.RpcError) as refused:
            stub.Produce(request, timeout=5, metadata=metadata)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "bearer token" in (refused.value.details() or "")
        assert token is None or token not in (refused.value.details() or "")
        # Health stays open: orchestrators' probes carry no token.
        health = health_pb2_grpc.HealthStub(channel)
        answer = health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        channel.close()
    with (
        Connection(cluster.addresses, token=TOKEN) as connection,
        Consumer(connection, group="check", topic="secured", from_beginning=True) as check,
    ):
        bodies = [m.body for m in check.poll(timeout_s=3.0)]
    assert b"intruder" not in bodies


def test_the_typed_client_without_a_token_fails_clearly(cluster: LocalCluster) -> None:
    with Admin(cluster.addresses, timeout_s=3.0) as admin, pytest.raises(RaftlogError) as refused:
        admin.list_topics()
    assert "bearer token" in str(refused.value)


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftlog.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_the_cli_takes_the_token_from_a_file_or_the_environment(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    import os

    servers = ",".join(cluster.addresses)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    done = _cli("topic", "list", "--servers", servers, "--token-file", str(token_file))
    assert done.returncode == 0, done.stderr
    assert "secured" in done.stdout
    done = _cli("topic", "list", "--servers", servers, env={**os.environ, "RAFTLOG_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    refused = _cli("topic", "list", "--servers", servers)
    assert refused.returncode == 1
    assert "bearer token" in refused.stderr and "Traceback" not in refused.stderr


def test_a_malformed_tokens_file_refuses_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "tokens"
    bad.write_text("orders:short\n")
    address = f"127.0.0.1:{free_port()}"
    done = _cli(
        "node",
        "start",
        "--node-id",
        "n1",
        "--listen-address",
        address,
        "--peers",
        f"n1={address}",
        "--data-dir",
        str(tmp_path / "n1"),
        "--auth-tokens-file",
        str(bad),
    )
    assert done.returncode == 2, done.stderr
    assert "auth_tokens_file" in done.stderr and "line 1" in done.stderr
    assert "short" not in done.stderr.replace("shorter", "")  # the token is never echoed
