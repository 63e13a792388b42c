"""The CLI: usage errors exit 2 with a message, `node start` configuration errors exit 2
before anything starts, operating errors are one line without a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.cli import main
from raftlog.cli.common import DEFAULT_SERVERS, default_servers


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "the following arguments are required: command"),
        (("nosuch",), "invalid choice"),
        (("node",), "required: node_command"),
        (("cluster", "up", "--nodes", "x"), "invalid int value"),
        (("produce",), "required: topic"),
        (("consume", "t", "--max", "many"), "invalid int value"),
        (("query", "time", "t", "zero", "1"), "invalid int value"),
        (("cluster", "up", "--durability", "never"), "invalid choice"),
    ],
)
def test_argument_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, err = run(capsys, *argv)
    assert code == 2
    assert message in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "produce" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("produce", "t", "x", "--count", "0"), "--count must be at least 1"),
        (("produce", "t", "x", "--key", "a b"), "--key must be non-empty"),
        (("produce", "t", "x", "--queue", "1", "--sharding-key", "k"), "give at most one"),
        (("consume", "t", "--max", "0"), "--max must be at least 1"),
        (("topic", "list", "--servers", "nohost"), "--servers: address 'nohost'"),
        (("topic", "list", "--timeout-s", "0"), "--timeout-s must be positive"),
        (("cluster", "up", "--nodes", "0"), "--nodes is 0"),
    ],
)
def test_checked_arguments_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("raftlog: ")
    assert message in err
    assert "Traceback" not in err


def node_args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "node",
        "start",
        "--node-id",
        "n1",
        "--listen",
        "127.0.0.1:7701",
        "--peers",
        "n1=127.0.0.1:7701,n2=127.0.0.1:7702",
        "--data-dir",
        str(tmp_path / "n1"),
        *extra,
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--durability", "maybe"), "durability: 'maybe' is not one of fsync, write"),
        (("--tick-ms", "soon"), "tick_ms: 'soon' is not an integer (--tick-ms)"),
        (("--election-ticks", "2"), "election_ticks: 2 must be greater than heartbeat_ticks"),
        (("--listen-address", "127.0.0.1:99999"), "listen_address: '127.0.0.1:99999'"),
        (("--preferred-leader", "n7"), "preferred_leader: 'n7' is not in peers"),
        (("--node-id", "bad id"), "node_id: 'bad id' must be 1..64 characters"),
    ],
)
def test_node_start_config_errors_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    code, err = run(capsys, *node_args(tmp_path, *extra))
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "n1").exists()  # nothing was created


def test_node_start_missing_fields_and_config_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NODE_ID", "LISTEN_ADDRESS", "PEERS", "DATA_DIR"):
        monkeypatch.delenv(f"RAFTLOG_{name}", raising=False)
    code, err = run(capsys, "node", "start", "--node-id", "n1")
    assert code == 2
    assert "listen_address: required" in err
    config = tmp_path / "node.toml"
    config.write_text('node_id = "n1"\nbogus = 1\n')
    code, err = run(capsys, "node", "start", "--config", str(config))
    assert code == 2
    assert "bogus: unknown setting in config file" in err
    code, err = run(capsys, "node", "start", "--config", str(tmp_path / "none.toml"))
    assert code == 2
    assert "does not exist" in err


def test_environment_feeds_node_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_DURABILITY", "sometimes")
    code, err = run(capsys, *node_args(tmp_path))
    assert code == 2
    assert "durability: 'sometimes'" in err
    assert "RAFTLOG_DURABILITY" in err


def test_unreachable_servers_fail_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, err = run(capsys, "topic", "list", "--servers", f"127.0.0.1:{port}", "--timeout-s", "1")
    assert code == 1
    assert err.startswith("raftlog: UnavailableError")
    assert len(err.strip().splitlines()) == 1


def test_cluster_down_without_cluster(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = run(capsys, "cluster", "down", "--data-dir", str(tmp_path))
    assert code == 1
    assert "no local cluster" in err


def test_default_servers(tmp_path: Path) -> None:
    assert default_servers(str(tmp_path)) == DEFAULT_SERVERS
    (tmp_path / "cluster.json").write_text('{"nodes": [{"port": 9001}, {"port": 9002}]}')
    assert default_servers(str(tmp_path)) == "127.0.0.1:9001,127.0.0.1:9002"
    (tmp_path / "cluster.json").write_text("not json")
    assert default_servers(str(tmp_path)) == DEFAULT_SERVERS
