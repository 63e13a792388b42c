"""`raftlog node health` (raftlog/cli/health.py) against a TLS server: with no flag it follows
the node's own settings (RAFTLOG_TLS_*_FILE, the name expected being RAFTLOG_NODE_ID, so a
certificate that names only the node id passes a probe on the loopback address) and presents
the node's certificate to a server that asks for one; flags set the same by hand; plain TCP to
a TLS port, or a client certificate missing, is UNREACHABLE (exit 1); a TLS file that cannot
be read is exit 2 in one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.cli import health as health_cli
from raftlog.testing import dev_ca
from tests.support.tls_health import tls_health_server

NODE_ID = "raftlog-0"
TLS_ENV = ("RAFTLOG_TLS_CA_FILE", "RAFTLOG_TLS_CERT_FILE", "RAFTLOG_TLS_KEY_FILE")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("certs")
    dev_ca.init_ca(str(directory))
    # As in a pod: the certificate names the node id (and its DNS name), not 127.0.0.1.
    dev_ca.issue(str(directory), NODE_ID, (f"{NODE_ID}.raftlog-headless.ns.svc",))
    return directory


@pytest.fixture(scope="module")
def address(certs: Path) -> Iterator[str]:
    """A TLS server that requires client certificates, serving grpc.health.v1 (SERVING)."""
    with tls_health_server(certs, NODE_ID, client_auth=True) as port:
        yield f"127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def no_node_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*TLS_ENV, "RAFTLOG_NODE_ID", "RAFTLOG_LISTEN_ADDRESS"):
        monkeypatch.delenv(name, raising=False)


def node_env(monkeypatch: pytest.MonkeyPatch, certs: Path, address: str) -> None:
    """The environment a node's container has (deploy/kubernetes/components/tls)."""
    files = (certs / "ca.pem", certs / f"{NODE_ID}.pem", certs / f"{NODE_ID}.key")
    for name, path in zip(TLS_ENV, files, strict=True):
        monkeypatch.setenv(name, str(path))
    monkeypatch.setenv("RAFTLOG_NODE_ID", NODE_ID)
    monkeypatch.setenv("RAFTLOG_LISTEN_ADDRESS", address.replace("127.0.0.1", "0.0.0.0"))


def test_the_node_own_settings_make_a_tls_probe(
    monkeypatch: pytest.MonkeyPatch, certs: Path, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    node_env(monkeypatch, certs, address)
    assert health_cli.main(["--timeout", "5"]) == 0
    assert capsys.readouterr().out.strip() == f"{address} SERVING"


def test_plain_tcp_to_a_tls_port_is_unreachable(address: str) -> None:
    assert health_cli.check(address, timeout_s=2.0).startswith("UNREACHABLE")
    assert health_cli.main(["--address", address, "--timeout", "2", "--quiet"]) == 1


def test_flags_set_tls_by_hand(certs: Path, address: str) -> None:
    flags = ["--address", address, "--timeout", "5", "--quiet", "--tls-ca", str(certs / "ca.pem")]
    client = [
        "--tls-cert",
        str(certs / f"{NODE_ID}.pem"),
        "--tls-key",
        str(certs / f"{NODE_ID}.key"),
    ]
    assert health_cli.main([*flags, *client, "--server-name", NODE_ID]) == 0
    # The certificate does not name 127.0.0.1: without the name, the check fails.
    assert health_cli.main([*flags, *client]) == 1
    # The server asks for a client certificate: without one, the handshake fails.
    assert health_cli.main([*flags, "--server-name", NODE_ID]) == 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--tls-ca", "/nonexistent/ca.pem"], "/nonexistent/ca.pem"),
        (["--tls-cert", "c.pem", "--tls-key", "k.pem"], "need --tls-ca"),
        (["--tls-ca", "ca.pem", "--tls-cert", "c.pem"], "go together"),
    ],
)
def test_bad_tls_settings_are_exit_2_in_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert health_cli.main(["--address", "127.0.0.1:1", *argv]) == 2
    error = capsys.readouterr().err
    assert says in error and error.count("\n") == 1


def test_the_node_settings_are_read_from_its_environment() -> None:
    env = {"RAFTLOG_TLS_CA_FILE": "/t/ca.pem", "RAFTLOG_NODE_ID": "n1"}
    assert health_cli.node_tls(env) == health_cli.ProbeTls("/t/ca.pem", None, None, "n1")
    assert health_cli.node_tls({"RAFTLOG_TLS_CA_FILE": ""}) is None
    assert health_cli.node_tls({}) is None
