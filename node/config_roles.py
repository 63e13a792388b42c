"""The rules of the master-slave settings (RocketMQ's classic HA) in a node's configuration.

``master_slave_problem(config)`` returns the first thing wrong with them as one line naming the
field, the value and the fix, or None; ``NodeConfig`` raises it as a ConfigError at start-up.

Rules this module keeps:
- A Raft node (``replication = "raft"``) keeps every master-slave setting at its default: a
  setting that would be silently ignored is refused instead.
- In static mode the master is ``broker_id`` 0 and every slave has another id (RocketMQ's
  rule); ``broker_role`` may be given too, but never contradict it.
- A SYNC_MASTER that waits for no slave (``min_in_sync_replicas`` 1) is a contradiction.
- A slave names its master (``ha_master_address``), which must be another member in ``peers``;
  under a controller (``controller_addresses``) nobody does: the controller elects, and
  ``broker_role`` says whether this broker is a SYNC_MASTER or an ASYNC_MASTER when elected.
- Pure: reads only the config object it is given.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for the annotations: node.config imports this module
    from raftlog.node.config import NodeConfig

REPLICATION_MODES = ("raft", "master-slave")
BROKER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER", "SLAVE")
FLUSH_DISK_TYPES = ("SYNC_FLUSH", "ASYNC_FLUSH")
# Fields that mean something only in master-slave mode, with their defaults.
MASTER_SLAVE_DEFAULTS: dict[str, object] = {
    "broker_name": "broker-a",
    "broker_id": 0,
    "broker_role": None,
    "flush_disk_type": None,
    "min_in_sync_replicas": None,
    "ha_max_gap_not_in_sync_bytes": 256 * 1024 * 1024,
    "ha_max_time_slave_not_catchup_ms": 15_000,
    "sync_flush_timeout_ms": 5_000,
    "ha_master_address": None,
    "slave_read_enable": False,
    "controller_addresses": None,
}
_POSITIVE_FIELDS = (
    "ha_max_gap_not_in_sync_bytes",
    "ha_max_time_slave_not_catchup_ms",
    "sync_flush_timeout_ms",
)
_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def master_slave_problem(config: NodeConfig) -> str | None:
    """The first thing wrong with ``config``'s replication settings, or None."""
    if config.replication not in REPLICATION_MODES:
        return f"replication: {config.replication!r} is not one of {', '.join(REPLICATION_MODES)}"
    if config.replication == "raft":
        return _raft_only_problem(config)
    return (
        _identity_problem(config)
        or _flush_problem(config)
        or _in_sync_problem(config)
        or _bounds_problem(config)
        or _master_address_problem(config)
    )


def _raft_only_problem(config: NodeConfig) -> str | None:
    for name, default in MASTER_SLAVE_DEFAULTS.items():
        value = getattr(config, name)
        if value != default:
            return (
                f'{name}: {value!r} applies only to replication = "master-slave" '
                '(this node runs replication = "raft")'
            )
    return None


def _identity_problem(config: NodeConfig) -> str | None:
    if not isinstance(config.broker_name, str) or not _NAME_PATTERN.fullmatch(config.broker_name):
        return f"broker_name: {config.broker_name!r} must be 1..64 characters from [A-Za-z0-9_-]"
    if type(config.broker_id) is not int or config.broker_id < 0:
        return f"broker_id: {config.broker_id!r} must be an integer >= 0"
    if config.broker_role is not None and config.broker_role not in BROKER_ROLES:
        return f"broker_role: {config.broker_role!r} is not one of {', '.join(BROKER_ROLES)}"
    if config.controller_addresses is None and (config.role == "SLAVE") != (config.broker_id != 0):
        return (
            f"broker_id: {config.broker_id} contradicts broker_role {config.role} (the master "
            "is broker_id 0 and every slave has another id)"
        )
    return None


def _flush_problem(config: NodeConfig) -> str | None:
    flush = config.flush_disk_type
    if flush is None:
        return None
    if flush not in FLUSH_DISK_TYPES:
        return f"flush_disk_type: {flush!r} is not one of {', '.join(FLUSH_DISK_TYPES)}"
    if flush != config.flush_type:
        return (
            f"flush_disk_type: {flush} contradicts durability {config.durability!r} "
            "(SYNC_FLUSH is durability fsync, ASYNC_FLUSH is write; set one of them)"
        )
    return None


def _in_sync_problem(config: NodeConfig) -> str | None:
    value = config.min_in_sync_replicas
    if value is None:
        return None
    if type(value) is not int or not 1 <= value <= len(config.peers):
        return (
            f"min_in_sync_replicas: {value!r} must be an integer in 1..{len(config.peers)} "
            "(the broker group: the master and its slaves, as listed in peers)"
        )
    if config.role == "SYNC_MASTER" and value == 1:
        return (
            "min_in_sync_replicas: 1 makes a SYNC_MASTER wait for no slave; use broker_role "
            "ASYNC_MASTER, or 2 or more"
        )
    return None


def _bounds_problem(config: NodeConfig) -> str | None:
    for name in _POSITIVE_FIELDS:
        value = getattr(config, name)
        if type(value) is not int or value <= 0:
            return f"{name}: {value!r} must be a positive integer"
    if type(config.slave_read_enable) is not bool:
        return f"slave_read_enable: {config.slave_read_enable!r} must be true or false"
    return None


def _controller_problem(config: NodeConfig) -> str | None:
    """Under a controller the controller names the master: broker_role only says which kind
    of master this broker is when elected, and there is no ha_master_address."""
    addresses = config.controller_addresses
    if addresses is None:
        return None
    parts = [a.strip() for a in addresses.split(",") if a.strip()]
    if not parts or any(":" not in a for a in parts):
        return f"controller_addresses: {addresses!r} is not host:port,host:port,..."
    if config.broker_role not in ("SYNC_MASTER", "ASYNC_MASTER"):
        return (
            f"broker_role: {config.broker_role!r}; under a controller it must be SYNC_MASTER or "
            "ASYNC_MASTER (what this broker is when the controller elects it)"
        )
    if config.ha_master_address is not None:
        return "ha_master_address: the controller names the master; leave it unset"
    return None


def _master_address_problem(config: NodeConfig) -> str | None:
    if config.controller_addresses is not None:
        return _controller_problem(config)
    address = config.ha_master_address
    if config.role != "SLAVE":
        if address is not None:
            return f"ha_master_address: {address!r} is set on a {config.role}; only a slave has one"
        return None
    if address is None:
        return "ha_master_address: a SLAVE needs its master's host:port (one of peers)"
    others = sorted(a for node_id, a in config.peers.items() if node_id != config.node_id)
    if address not in others:
        return (
            f"ha_master_address: {address!r} is not another member's address in peers "
            f"({', '.join(others) or 'none'})"
        )
    return None
