"""`raftlog certs init|issue`: the CA and the certificates it issues name what they should,
keys are 0600, nothing is replaced without --force, and mistakes exit non-zero in one line."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from raftlog.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def names(cert: x509.Certificate) -> tuple[str, list[object]]:
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    alternative = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    sans: list[object] = [*alternative.get_values_for_type(x509.DNSName)]
    sans += alternative.get_values_for_type(x509.IPAddress)
    return str(common), sans


@pytest.fixture
def ca(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    directory = tmp_path / "ca"
    code, out = run(capsys, "certs", "init", "--dir", str(directory))
    assert code == 0, out
    return directory


def test_init_writes_a_ca_with_a_private_key(ca: Path) -> None:
    assert stat.S_IMODE((ca / "ca.key").stat().st_mode) == 0o600
    constraints = load(ca / "ca.pem").extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.value.ca


def test_a_node_certificate_names_its_id_and_hosts(
    ca: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("certs", "issue", "--dir", str(ca), "--node", "n1", "--host", "n1.example.org")
    code, out = run(capsys, *argv, "--host", "10.0.0.5")
    assert code == 0, out
    cert = load(ca / "n1.pem")
    assert names(cert) == ("n1", ["n1", "n1.example.org", ipaddress.ip_address("10.0.0.5")])
    cert.verify_directly_issued_by(load(ca / "ca.pem"))
    assert stat.S_IMODE((ca / "n1.key").stat().st_mode) == 0o600


def test_default_hosts_and_a_client(ca: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "certs", "issue", "--dir", str(ca), "--node", "n2")[0] == 0
    assert names(load(ca / "n2.pem"))[1] == ["n2", "localhost", ipaddress.ip_address("127.0.0.1")]
    assert run(capsys, "certs", "issue", "--dir", str(ca), "--client", "alice")[0] == 0
    assert names(load(ca / "alice.pem")) == ("alice", ["alice"])


def test_nothing_is_replaced_without_force(ca: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (ca / "ca.key").read_bytes()
    code, out = run(capsys, "certs", "init", "--dir", str(ca))
    assert code == 1
    assert "--force" in out and "Traceback" not in out
    assert (ca / "ca.key").read_bytes() == before
    assert run(capsys, "certs", "issue", "--dir", str(ca), "--client", "bob")[0] == 0
    issued = (ca / "bob.pem").read_bytes()
    assert run(capsys, "certs", "issue", "--dir", str(ca), "--client", "bob")[0] == 1
    assert (ca / "bob.pem").read_bytes() == issued
    assert run(capsys, "certs", "issue", "--dir", str(ca), "--client", "bob", "--force")[0] == 0
    assert (ca / "bob.pem").read_bytes() != issued
    assert run(capsys, "certs", "init", "--dir", str(ca), "--force")[0] == 0
    assert (ca / "ca.key").read_bytes() != before


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--node", "a b"), "must be 1..64 characters"),
        (("--client", "ca"), "the CA's own file name"),
        (("--client", "c", "--host", "h"), "--host is for --node"),
        (("--node", "n1", "--host", "a,b"), "is not a host name"),
        (("--node", "n1", "--valid-days", "0"), "--valid-days must be at least 1"),
        ((), "one of the arguments --node --client is required"),
    ],
)
def test_mistakes_exit_2(
    ca: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], message: str
) -> None:
    code, out = run(capsys, "certs", "issue", "--dir", str(ca), *extra)
    assert code == 2
    assert message in out


def test_issuing_without_a_ca_says_how_to_make_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "certs", "issue", "--dir", str(tmp_path), "--node", "n1")
    assert code == 2
    assert "raftlog certs init" in out
    (tmp_path / "ca.pem").write_text("garbage")
    (tmp_path / "ca.key").write_text("garbage")
    code, out = run(capsys, "certs", "issue", "--dir", str(tmp_path), "--node", "n1")
    assert code == 2
    assert "cannot be read" in out
