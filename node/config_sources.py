"""Where a node's settings come from, and in what order: a TOML file (``--config``), then
``RAFTLOG_<FIELD>`` environment variables, then command-line flags, each overriding the one
before; ``load_config`` merges them into a checked ``NodeConfig`` (node/config.py).

Rules this module keeps: every field has exactly one name in every source (the dataclass
field, ``RAFTLOG_`` + its upper case, ``--field-name``); a value of the wrong type, an
unknown key or an unreadable file is a ConfigError naming the source; an empty environment
variable counts as unset; the data directory is checked, never created, before a node starts.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from raftlog.node.config import ENV_PREFIX, ConfigError, NodeConfig, parse_peers

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(NodeConfig))
REQUIRED_FIELDS = ("node_id", "listen_address", "peers", "data_dir")
_INT_FIELDS = frozenset(
    name
    for name in FIELD_NAMES
    if name.endswith(("_ms", "_us", "_ticks", "_bytes", "_hours", "_count"))
) | {"broker_id", "min_in_sync_replicas", "transaction_check_max"}
_FLOAT_FIELDS = frozenset(name for name in FIELD_NAMES if name.endswith("_ratio"))
_BOOL_FIELDS = frozenset(name for name in FIELD_NAMES if name.endswith("_enable"))
# Fields written "n1=host:port,n2=host:port" in the environment and on the command line.
_ADDRESS_MAP_FIELDS = frozenset({"peers", "peer_addresses"})
_BOOL_TEXT = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_OPTIONAL_FIELDS = frozenset(
    {
        "advertise_address",
        "preferred_leader",
        "broker_role",
        "flush_disk_type",
        "min_in_sync_replicas",
        "ha_master_address",
        "controller_addresses",
        "metrics_listen",
        "join",
        "peer_listen",
        "peer_addresses",
        "tls_ca_file",
        "tls_cert_file",
        "tls_key_file",
        "auth_tokens_file",
        "acl_superusers",
    }
)


def env_var(name: str) -> str:
    """The environment variable that sets field ``name``."""
    return ENV_PREFIX + name.upper()


def _from_text(name: str, text: str, source: str) -> object:
    """Convert an environment/CLI string to the field's type."""
    if name in _BOOL_FIELDS:
        flag = _BOOL_TEXT.get(text.strip().lower())
        if flag is None:
            raise ConfigError(f"{name}: {text!r} is not true or false ({source})")
        return flag
    if name in _OPTIONAL_FIELDS and text.strip() == "":
        return ""
    try:
        if name in _INT_FIELDS:
            return int(text.strip())
        if name in _FLOAT_FIELDS:
            return float(text.strip())
    except ValueError:
        kind = "an integer" if name in _INT_FIELDS else "a number"
        raise ConfigError(f"{name}: {text!r} is not {kind} ({source})") from None
    if name in _ADDRESS_MAP_FIELDS:
        return parse_peers(text, name)
    return text


def _from_toml(name: str, value: object, source: str) -> object:
    """Check a TOML value's type (TOML is typed: no string-to-int guessing here)."""
    if name in _ADDRESS_MAP_FIELDS:
        if isinstance(value, str):
            return parse_peers(value, name)
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return dict(value)
        raise ConfigError(f'{name}: must be a table of node_id = "host:port" ({source})')
    if name in _BOOL_FIELDS:
        if type(value) is not bool:
            raise ConfigError(f"{name}: {value!r} is not true or false ({source})")
    elif name in _INT_FIELDS:
        if type(value) is not int:
            raise ConfigError(f"{name}: {value!r} is not an integer ({source})")
    elif name in _FLOAT_FIELDS:
        if type(value) not in (int, float):
            raise ConfigError(f"{name}: {value!r} is not a number ({source})")
        return float(value)  # type: ignore[arg-type]
    elif not isinstance(value, str):
        raise ConfigError(f"{name}: {value!r} is not a string ({source})")
    return value


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file: {path!r} does not exist") from None
    except OSError as error:
        raise ConfigError(f"config file: cannot read {path!r}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file: {path!r} is not valid TOML: {error}") from None
    unknown = sorted(set(document) - set(FIELD_NAMES))
    if unknown:
        raise ConfigError(
            f"{unknown[0]}: unknown setting in config file {path!r} "
            f"(known: {', '.join(FIELD_NAMES)})"
        )
    return document


def load_config(
    file: str | None,
    env: Mapping[str, str],
    overrides: Mapping[str, object],
) -> NodeConfig:
    """Build and validate a NodeConfig from CLI ``overrides`` > ``env`` > TOML ``file`` >
    defaults.

    ``overrides`` maps field names to values already of the field's type, or to strings (as
    argparse gives them), which are converted like environment values; None means "not given".
    An empty environment variable counts as unset. Raises ConfigError naming the field.
    """
    values: dict[str, object] = {}
    # Where each value came from, so a validation error can say what to change.
    sources: dict[str, str] = {}
    if file is not None:
        for name, value in _read_file(file).items():
            values[name] = _from_toml(name, value, f"config file {file}")
            sources[name] = f"config file {file}"
    for name in FIELD_NAMES:
        text = env.get(env_var(name))
        if text is not None and text != "":
            values[name] = _from_text(name, text, f"environment variable {env_var(name)}")
            sources[name] = f"environment variable {env_var(name)}"
    for name, value in overrides.items():
        if name not in FIELD_NAMES:
            raise ConfigError(f"{name}: unknown setting")
        if value is None:
            continue
        flag = f"--{name.replace('_', '-')}"
        values[name] = _from_text(name, value, flag) if isinstance(value, str) else value
        sources[name] = flag
    for name in _OPTIONAL_FIELDS:
        if values.get(name) == "":
            values[name] = None
    if "peers" not in values and values.get("join") and "node_id" in values:
        # A joining node learns the members from the cluster; it only needs to know itself.
        own = values.get("advertise_address") or values.get("listen_address")
        values["peers"] = {str(values["node_id"]): str(own)}
    for name in REQUIRED_FIELDS:
        if name not in values:
            raise ConfigError(
                f"{name}: required; set --{name.replace('_', '-')}, {env_var(name)} "
                f"or {name} in the config file"
            )
    try:
        config = NodeConfig(**values)  # type: ignore[arg-type]
    except ConfigError as error:
        field_name = str(error).split(":", 1)[0].split("[", 1)[0]
        source = sources.get(field_name)
        if source is None:
            raise
        raise ConfigError(f"{error} (from {source})") from None
    check_data_dir(config.data_dir)
    return config


def check_data_dir(path: str) -> None:
    """Check ``path`` is a writable directory or could be created, without creating it."""
    probe = os.path.abspath(path)
    if os.path.exists(probe) and not os.path.isdir(probe):
        raise ConfigError(f"data_dir: {path!r} exists and is not a directory")
    # Walk up to the nearest existing ancestor: it must be a directory we may write into.
    for _ in range(probe.count(os.sep) + 1):
        if os.path.exists(probe):
            break
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise ConfigError(f"data_dir: {path!r} cannot be created ({probe!r} is not a directory)")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"data_dir: {path!r} is not writable ({probe!r} denies write access)")
