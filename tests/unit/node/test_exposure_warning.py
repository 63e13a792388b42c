"""A node whose client port listens beyond this host without TLS says so in one line at start
(issue 16); on loopback, or with TLS, it says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.node.config import NodeConfig


def config_listening_at(tmp_path: Path, listen: str, tls: bool = False) -> NodeConfig:
    ca, cert, key = (str(tmp_path / f"{n}.pem") for n in ("ca", "cert", "key"))
    return NodeConfig(
        node_id="n1",
        listen_address=listen,
        peers={"n1": listen, "n2": "127.0.0.1:7702", "n3": "127.0.0.1:7703"},
        data_dir=str(tmp_path),
        tls_ca_file=ca if tls else None,
        tls_cert_file=cert if tls else None,
        tls_key_file=key if tls else None,
    )


@pytest.mark.parametrize(
    "listen", ["127.0.0.1:7701", "127.0.0.5:7701", "localhost:7701", "[::1]:7701"]
)
def test_loopback_is_quiet(tmp_path: Path, listen: str) -> None:
    assert config_listening_at(tmp_path, listen).exposure_warning() is None


@pytest.mark.parametrize(
    "listen", ["0.0.0.0:7701", "10.0.0.5:7701", "node1.example:7701", "[::]:7701"]
)
def test_beyond_this_host_without_tls_warns_once(tmp_path: Path, listen: str) -> None:
    warning = config_listening_at(tmp_path, listen).exposure_warning()
    assert warning is not None and "without TLS" in warning and "\n" not in warning


def test_tls_is_quiet(tmp_path: Path) -> None:
    assert config_listening_at(tmp_path, "0.0.0.0:7701", tls=True).exposure_warning() is None
