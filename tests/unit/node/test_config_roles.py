"""The master-slave settings: RocketMQ's readings, every refused combination, and the sources
(flag, environment, TOML) for the new field kinds (optional integers, booleans)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from raftlog.node.config import ConfigError, NodeConfig
from raftlog.node.config_roles import MASTER_SLAVE_DEFAULTS
from raftlog.node.config_sources import load_config

from .test_config import base, make

MS = {"replication": "master-slave"}
SLAVE = {**MS, "node_id": "n2", "listen_address": "127.0.0.1:7702", "broker_id": 1}


def test_the_defaults_in_the_rules_are_the_dataclass_defaults() -> None:
    defaults = {f.name: f.default for f in fields(NodeConfig) if f.name in MASTER_SLAVE_DEFAULTS}
    assert defaults == MASTER_SLAVE_DEFAULTS


def test_rocketmq_readings_of_broker_id_and_role(tmp_path: Path) -> None:
    master = make(tmp_path, **MS)
    assert (master.role, master.in_sync_replicas_needed, master.flush_type) == (
        "ASYNC_MASTER",
        1,
        "SYNC_FLUSH",
    )
    sync = make(tmp_path, **MS, broker_role="SYNC_MASTER", durability="write")
    assert (sync.role, sync.in_sync_replicas_needed, sync.flush_type) == (
        "SYNC_MASTER",
        2,
        "ASYNC_FLUSH",
    )
    slave = make(tmp_path, **SLAVE, ha_master_address="127.0.0.1:7701")
    assert slave.role == "SLAVE"
    assert make(tmp_path, **MS, broker_role="SYNC_MASTER", min_in_sync_replicas=3).role


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"replication": "paxos"}, r"replication: 'paxos' is not one of raft, master-slave"),
        ({"broker_role": "SLAVE"}, r"broker_role: 'SLAVE' applies only to replication"),
        ({"slave_read_enable": True}, r"slave_read_enable: True applies only"),
        ({**MS, "broker_name": "a b"}, r"broker_name: 'a b' must be"),
        ({**MS, "broker_id": -1}, r"broker_id: -1 must be an integer >= 0"),
        ({**MS, "broker_role": "LEADER"}, r"broker_role: 'LEADER' is not one of"),
        ({**MS, "broker_role": "SLAVE"}, r"broker_id: 0 contradicts broker_role SLAVE"),
        ({**MS, "broker_id": 2, "broker_role": "SYNC_MASTER"}, r"broker_id: 2 contradicts"),
        ({**MS, "flush_disk_type": "NEVER"}, r"flush_disk_type: 'NEVER' is not one of"),
        ({**MS, "flush_disk_type": "ASYNC_FLUSH"}, r"contradicts durability 'fsync'"),
        ({**MS, "min_in_sync_replicas": 4}, r"min_in_sync_replicas: 4 must be an integer in 1..3"),
        ({**MS, "min_in_sync_replicas": 0}, r"min_in_sync_replicas: 0 must be"),
        (
            {**MS, "broker_role": "SYNC_MASTER", "min_in_sync_replicas": 1},
            r"1 makes a SYNC_MASTER wait for no slave",
        ),
        ({**MS, "sync_flush_timeout_ms": 0}, r"sync_flush_timeout_ms: 0 must be a positive"),
        ({**MS, "slave_read_enable": "yes"}, r"slave_read_enable: 'yes' must be true or false"),
        ({**MS, "ha_master_address": "127.0.0.1:7702"}, r"is set on a ASYNC_MASTER"),
        (SLAVE, r"ha_master_address: a SLAVE needs its master's host:port"),
        (
            {**SLAVE, "ha_master_address": "127.0.0.1:9999"},
            r"'127.0.0.1:9999' is not another member's address in peers",
        ),
        (
            {**SLAVE, "ha_master_address": "127.0.0.1:7702"},
            r"'127.0.0.1:7702' is not another member's address",
        ),
    ],
)
def test_refused_combinations(tmp_path: Path, changes: dict[str, object], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        make(tmp_path, **changes)


def test_sources_parse_booleans_and_optional_integers(tmp_path: Path) -> None:
    env = {
        "RAFTLOG_REPLICATION": "master-slave",
        "RAFTLOG_BROKER_ROLE": "SYNC_MASTER",
        "RAFTLOG_MIN_IN_SYNC_REPLICAS": "3",
        "RAFTLOG_SLAVE_READ_ENABLE": "true",
    }
    config = load_config(None, env, base(tmp_path))
    assert (config.min_in_sync_replicas, config.slave_read_enable) == (3, True)
    flags = {**base(tmp_path), "slave_read_enable": "no", "min_in_sync_replicas": ""}
    config = load_config(None, env, flags)
    assert (config.min_in_sync_replicas, config.slave_read_enable) == (None, False)
    with pytest.raises(ConfigError, match=r"slave_read_enable: 'maybe' is not true or false"):
        load_config(None, {**env, "RAFTLOG_SLAVE_READ_ENABLE": "maybe"}, base(tmp_path))
    toml = tmp_path / "node.toml"
    toml.write_text('replication = "master-slave"\nslave_read_enable = "true"\n')
    with pytest.raises(ConfigError, match=r"slave_read_enable: 'true' is not true or false"):
        load_config(str(toml), {}, base(tmp_path))
    toml.write_text('replication = "master-slave"\nslave_read_enable = true\nbroker_id = 0\n')
    assert load_config(str(toml), {}, base(tmp_path)).slave_read_enable is True


def test_controller_mode_settings(tmp_path: Path) -> None:
    controlled = {**MS, "controller_addresses": "127.0.0.1:7801,127.0.0.1:7802"}
    config = make(tmp_path, **controlled, broker_role="SYNC_MASTER", broker_id=2)
    assert config.controlled and config.role == "SYNC_MASTER"
    with pytest.raises(ConfigError, match="under a controller it must be SYNC_MASTER"):
        make(tmp_path, **controlled, broker_role="SLAVE", broker_id=1)
    with pytest.raises(ConfigError, match="the controller names the master"):
        make(tmp_path, **controlled, broker_role="ASYNC_MASTER", ha_master_address="127.0.0.1:7702")
    with pytest.raises(ConfigError, match="controller_addresses: 'nowhere'"):
        make(tmp_path, **MS, broker_role="SYNC_MASTER", controller_addresses="nowhere")
    assert not make(tmp_path, **MS).controlled
