"""NodeConfig: precedence of the sources and every validation error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raftlog.node.config import ConfigError, NodeConfig, parse_address, parse_peers
from raftlog.node.config_sources import FIELD_NAMES, env_var, load_config
from raftlog.store.config import FlushMode

PEERS = {"n1": "127.0.0.1:7701", "n2": "127.0.0.1:7702", "n3": "127.0.0.1:7703"}


def base(tmp_path: Path, **changes: object) -> dict[str, object]:
    values: dict[str, object] = {
        "node_id": "n1",
        "listen_address": "127.0.0.1:7701",
        "peers": dict(PEERS),
        "data_dir": str(tmp_path / "n1"),
    }
    values.update(changes)
    return values


def make(tmp_path: Path, **changes: object) -> NodeConfig:
    return NodeConfig(**base(tmp_path, **changes))  # type: ignore[arg-type]


def test_defaults(tmp_path: Path) -> None:
    config = make(tmp_path)
    assert config.durability == "fsync"
    assert config.tick_ms == 50
    assert config.election_ticks == 10
    assert config.heartbeat_ticks == 2
    assert config.segment_size_bytes == 64 * 1024 * 1024
    assert config.max_body_bytes == 4 * 1024 * 1024
    assert config.max_write_timeout_ms == 10_000
    assert config.cluster_id == "raftlog"
    assert config.advertised == "127.0.0.1:7701"
    assert config.log_level == "info"


def test_store_config_is_rooted_under_data_dir(tmp_path: Path) -> None:
    store = make(tmp_path, durability="write", file_reserved_hours=5).store_config()
    assert store.root_dir == os.path.join(str(tmp_path / "n1"), "store")
    assert store.flush_mode is FlushMode.ASYNC_FLUSH
    assert store.retention_hours == 5
    assert store.limits.max_body_bytes == 4 * 1024 * 1024
    assert make(tmp_path).store_config().flush_mode is FlushMode.SYNC_FLUSH


def test_precedence_cli_over_env_over_file_over_default(tmp_path: Path) -> None:
    file = tmp_path / "node.toml"
    file.write_text(
        'node_id = "n1"\nlisten_address = "127.0.0.1:7701"\n'
        f'data_dir = "{tmp_path / "d"}"\n'
        "tick_ms = 10\nelection_ticks = 20\nheartbeat_ticks = 3\n"
        '[peers]\nn1 = "127.0.0.1:7701"\nn2 = "127.0.0.1:7702"\n'
    )
    env = {"RAFTLOG_ELECTION_TICKS": "30", "RAFTLOG_HEARTBEAT_TICKS": "4", "UNRELATED": "x"}
    config = load_config(str(file), env, {"heartbeat_ticks": 5, "log_level": None})
    assert config.tick_ms == 10  # file
    assert config.election_ticks == 30  # env over file
    assert config.heartbeat_ticks == 5  # CLI over env
    assert config.max_body_bytes == 4 * 1024 * 1024  # default
    assert config.log_level == "info"  # None override = not given
    assert config.peers == {"n1": "127.0.0.1:7701", "n2": "127.0.0.1:7702"}


def test_env_only_with_peers_string(tmp_path: Path) -> None:
    env = {
        "RAFTLOG_NODE_ID": "n2",
        "RAFTLOG_LISTEN_ADDRESS": "127.0.0.1:7702",
        "RAFTLOG_PEERS": "n1=127.0.0.1:7701, n2=127.0.0.1:7702",
        "RAFTLOG_DATA_DIR": str(tmp_path / "x"),
        "RAFTLOG_DISK_FULL_RATIO": "0.95",
        "RAFTLOG_PREFERRED_LEADER": "",
    }
    config = load_config(None, env, {})
    assert config.node_id == "n2"
    assert config.peers == {"n1": "127.0.0.1:7701", "n2": "127.0.0.1:7702"}
    assert config.disk_full_ratio == 0.95
    assert config.preferred_leader is None


def test_cli_strings_are_converted(tmp_path: Path) -> None:
    overrides = {k: v for k, v in base(tmp_path).items() if k != "peers"}
    overrides["peers"] = "n1=127.0.0.1:7701"
    overrides["tick_ms"] = "25"
    overrides["switch_interval_us"] = "500"
    config = load_config(None, {}, overrides)
    assert (config.tick_ms, config.switch_interval_us) == (25, 500)


def test_env_var_names() -> None:
    assert env_var("tick_ms") == "RAFTLOG_TICK_MS"
    assert "peers" in FIELD_NAMES


def test_advertise_address(tmp_path: Path) -> None:
    peers = dict(PEERS, n1="10.0.0.1:7701")
    config = make(
        tmp_path, listen_address="0.0.0.0:7701", advertise_address="10.0.0.1:7701", peers=peers
    )
    assert config.advertised == "10.0.0.1:7701"
    with pytest.raises(ConfigError, match=r"peers\[n1\].*advertise_address"):
        make(tmp_path, advertise_address="10.0.0.2:7701", peers=peers)


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"node_id": ""}, "node_id: '' must be 1..64"),
        ({"node_id": "n 1"}, "node_id: 'n 1' must be"),
        ({"node_id": "x" * 65}, "node_id: .* must be 1..64"),
        ({"cluster_id": "a/b"}, "cluster_id"),
        ({"listen_address": "127.0.0.1"}, "listen_address: .* host:port"),
        ({"listen_address": "127.0.0.1:0"}, "listen_address: .* 1..65535"),
        ({"listen_address": "127.0.0.1:65536"}, "listen_address: .* 1..65535"),
        ({"listen_address": ":7701"}, "listen_address"),
        ({"listen_address": "bad host:7701"}, "listen_address: .* malformed host"),
        ({"listen_address": "[zz::1]:7701"}, "listen_address: .* IPv6"),
        ({"peers": {}}, "peers: must list every voter"),
        ({"peers": {"n2": "127.0.0.1:7702"}}, "peers: does not contain this node's id 'n1'"),
        ({"peers": dict(PEERS, n1="127.0.0.1:9999")}, r"peers\[n1\]: .* listen_address"),
        ({"peers": dict(PEERS, n2="127.0.0.1")}, r"peers\[n2\]: .* host:port"),
        ({"peers": dict(PEERS, n3="127.0.0.1:7702")}, "peers: two voters share an address"),
        ({"peers": {"n1": "127.0.0.1:7701", "b d": "h:1"}}, "peers: 'b d' must be"),
        ({"data_dir": ""}, "data_dir: must be a non-empty path"),
        ({"durability": "sync"}, "durability: 'sync' is not one of fsync, write"),
        ({"tick_ms": 0}, "tick_ms: 0 must be a positive integer"),
        ({"election_ticks": -1}, "election_ticks: -1 must be a positive integer"),
        ({"heartbeat_ticks": 1.5}, "heartbeat_ticks: 1.5 must be a positive integer"),
        ({"segment_size_bytes": True}, "segment_size_bytes: True must be a positive integer"),
        ({"max_body_bytes": 0}, "max_body_bytes"),
        ({"max_write_timeout_ms": 0}, "max_write_timeout_ms"),
        ({"max_inflight_bytes": 0}, "max_inflight_bytes"),
        ({"file_reserved_hours": -1}, "file_reserved_hours: -1 must be an integer >= 0"),
        ({"election_ticks": 2, "heartbeat_ticks": 2}, "election_ticks: 2 must be greater than"),
        ({"segment_size_bytes": 1024, "max_body_bytes": 1024}, "segment_size_bytes: 1024 must"),
        ({"max_inflight_bytes": 1024, "max_body_bytes": 2048}, "max_inflight_bytes: 1024 must"),
        ({"disk_full_ratio": 1.5}, r"disk_full_ratio: 1.5 must be a number in \(0, 1\]"),
        ({"disk_clean_watermark_ratio": 0}, "disk_clean_watermark_ratio: 0 must be"),
        ({"disk_force_clean_ratio": 0.95}, "disk_force_clean_ratio: the ratios must satisfy"),
        ({"preferred_leader": "n9"}, "preferred_leader: 'n9' is not in peers"),
        ({"log_level": "loud"}, "log_level: 'loud' is not one of"),
        ({"switch_interval_us": 0}, "switch_interval_us: 0 must be a positive integer"),
        ({"switch_interval_us": 2_000_000}, "switch_interval_us: 2000000 is above 1000000"),
    ],
)
def test_validation_errors(tmp_path: Path, changes: dict[str, object], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        make(tmp_path, **changes)


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


def test_missing_required_field_names_all_sources(tmp_path: Path) -> None:
    values = base(tmp_path)
    del values["data_dir"]
    with pytest.raises(ConfigError, match="data_dir: required; set --data-dir, RAFTLOG_DATA_DIR"):
        load_config(None, {}, values)


def test_unknown_key_in_file(tmp_path: Path) -> None:
    file = tmp_path / "node.toml"
    file.write_text('node_id = "n1"\ntick_msec = 5\n')
    with pytest.raises(ConfigError, match="tick_msec: unknown setting in config file"):
        load_config(str(file), {}, {})


def test_unknown_override(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tickms: unknown setting"):
        load_config(None, {}, {"tickms": 5})


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "missing.toml"), {}, {})
    bad = tmp_path / "bad.toml"
    bad.write_text("node_id = \n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(str(bad), {}, {})
    typed = tmp_path / "typed.toml"
    typed.write_text('tick_ms = "50"\n')
    with pytest.raises(ConfigError, match=r"tick_ms: '50' is not an integer .config file"):
        load_config(str(typed), {}, {})
    ratio = tmp_path / "ratio.toml"
    ratio.write_text('disk_full_ratio = "x"\n')
    with pytest.raises(ConfigError, match="disk_full_ratio: 'x' is not a number"):
        load_config(str(ratio), {}, {})
    peers = tmp_path / "peers.toml"
    peers.write_text("peers = 5\n")
    with pytest.raises(ConfigError, match="peers: must be a table"):
        load_config(str(peers), {}, {})
    name = tmp_path / "name.toml"
    name.write_text("node_id = 5\n")
    with pytest.raises(ConfigError, match="node_id: 5 is not a string"):
        load_config(str(name), {}, {})


def test_env_conversion_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tick_ms: 'fast' is not an integer .environment"):
        load_config(None, {"RAFTLOG_TICK_MS": "fast"}, base(tmp_path))
    with pytest.raises(ConfigError, match="disk_full_ratio: 'full' is not a number"):
        load_config(None, {"RAFTLOG_DISK_FULL_RATIO": "full"}, base(tmp_path))
    with pytest.raises(ConfigError, match="peers: 'n1' is not of the form node_id=host:port"):
        load_config(None, {"RAFTLOG_PEERS": "n1"}, {})


def test_peers_parsing() -> None:
    assert parse_peers("a=h:1,,b=h:2") == {"a": "h:1", "b": "h:2"}
    with pytest.raises(ConfigError, match="listed twice"):
        parse_peers("a=h:1,a=h:2")
    assert parse_address("[::1]:7701", "x") == ("::1", 7701)
    assert parse_address("localhost:1", "x") == ("localhost", 1)


def test_data_dir_must_be_creatable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=r"data_dir: .* exists and is not a directory"):
        load_config(None, {}, base(tmp_path, data_dir=str(blocker)))
    with pytest.raises(ConfigError, match=r"data_dir: .* cannot be created"):
        load_config(None, {}, base(tmp_path, data_dir=str(blocker / "sub")))
    config = load_config(None, {}, base(tmp_path, data_dir=str(tmp_path / "a" / "b")))
    assert not (tmp_path / "a").exists()  # checked, not created
    assert config.data_dir.endswith("b")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_data_dir_must_be_writable(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ConfigError, match=r"data_dir: .* is not writable"):
        load_config(None, {}, base(tmp_path, data_dir=str(locked / "n1")))


def test_access_control_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="acl_enable: needs auth_tokens_file"):
        make(tmp_path, acl_enable=True)
    with pytest.raises(ConfigError, match="acl_superusers: 'a b' is not a client name"):
        make(tmp_path, acl_superusers="root, a b")
    config = load_config(
        None,
        {"RAFTLOG_ACL_ENABLE": "true", "RAFTLOG_ACL_SUPERUSERS": "root, ops"},
        {**base(tmp_path), "auth_tokens_file": str(tmp_path / "tokens")},
    )
    assert config.acl_enable and config.superusers == ("root", "ops")
