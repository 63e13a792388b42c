"""The client CLI against a TLS cluster (LocalCluster(tls=True): mTLS on the client port):
with --tls-ca/--tls-cert/--tls-key, or the RAFTLOG_TLS_* environment, topic create, produce,
consume, member list and cluster status work; without them, or without a client
certificate, each fails in one line that names the TLS flags, exit 1, no traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.cli import main
from raftlog.client import ClientTls
from raftlog.testing.local_cluster import LocalCluster

TOPIC = "cli-secure"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base: Path = tmp_path_factory.mktemp("cli-tls")
    running = LocalCluster(str(base / "data"), base_port=0, tls=True)
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def tls_of(cluster: LocalCluster) -> ClientTls:
    assert cluster.client_tls is not None and cluster.client_tls.cert_file is not None
    return cluster.client_tls


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_client_commands_with_the_tls_flags(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    tls = tls_of(cluster)
    flags = ["--servers", ",".join(cluster.addresses), "--tls-ca", tls.ca_file]
    flags += ["--tls-cert", str(tls.cert_file), "--tls-key", str(tls.key_file)]
    code, out, err = run(capsys, "topic", "create", TOPIC, "--queues", "1", *flags)
    assert code == 0, err
    code, out, err = run(capsys, "produce", TOPIC, "over tls", *flags)
    assert (code, out.startswith("sent q0 @0")) == (0, True), err
    code, out, err = run(capsys, "consume", TOPIC, "--from-beginning", "--max", "1", *flags)
    assert code == 0, err
    assert out.rstrip().endswith("over tls")
    code, out, err = run(capsys, "member", "list", *flags)
    assert code == 0, err
    assert {"n1", "n2", "n3"} <= {line.split()[0] for line in out.splitlines()}
    code, out, err = run(capsys, "cluster", "status", *flags)
    assert code == 0, err
    assert "leader n" in out and " down " not in out, out


def test_the_environment_stands_in_for_the_flags(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tls = tls_of(cluster)
    monkeypatch.setenv("RAFTLOG_TLS_CA", tls.ca_file)
    monkeypatch.setenv("RAFTLOG_TLS_CERT", str(tls.cert_file))
    monkeypatch.setenv("RAFTLOG_TLS_KEY", str(tls.key_file))
    code, _, err = run(capsys, "topic", "list", "--servers", ",".join(cluster.addresses))
    assert code == 0, err


@pytest.mark.parametrize(
    ("with_ca", "hint"),
    [(False, "needs --tls-ca"), (True, "needs --tls-cert and --tls-key")],
)
def test_without_tls_flags_a_command_fails_in_one_line(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], with_ca: bool, hint: str
) -> None:
    extra = ["--tls-ca", tls_of(cluster).ca_file] if with_ca else []
    servers = ",".join(cluster.addresses)
    code, _, err = run(capsys, "topic", "list", "--servers", servers, "--timeout-s", "2", *extra)
    assert code == 1
    assert hint in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_half_a_client_pair_is_a_usage_error(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    tls = tls_of(cluster)
    argv = ["topic", "list", "--tls-ca", tls.ca_file, "--tls-cert", str(tls.cert_file)]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "both a client certificate and its key" in err
    code, _, err = run(capsys, "topic", "list", "--tls-key", str(tls.key_file))
    assert code == 2
    assert "need --tls-ca" in err
