"""`raftlog node start`: build a NodeConfig from flags, environment and a TOML file, then run
the node until SIGTERM/SIGINT.

Rules this module keeps: every NodeConfig field has a flag (``--`` + the field name with
dashes; ``--listen`` is short for ``--listen-address``); flags left out do not override the
environment or the file (their default is None); a ConfigError exits 2 before anything opens;
a client port reachable beyond this host without TLS is said in one warning line at start.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields

# The help text of each flag; the field list itself comes from NodeConfig.
_HELP = {
    "node_id": "this node's id, [A-Za-z0-9_-]{1,64}",
    "listen_address": "host:port serving clients and peers",
    "peers": "every voter, this node included: n1=host:port,n2=host:port",
    "data_dir": "the node's data directory",
    "advertise_address": "host:port others use for this node (default: the listen address)",
    "cluster_id": "the cluster's name (default raftlog)",
    "durability": "fsync (default) or write: what a majority must do before a write is acked",
    "metrics_listen": "host:port of the Prometheus endpoint, e.g. 0.0.0.0:9701 (port 0: a "
    "free one; default: none)",
    "join": "host:port,... of members to ask to add this node (fresh data dir): it joins as "
    "a learner, catches up, then asks to be promoted to voter",
}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `node start`."""
    from raftlog.node.config import NodeConfig

    node = commands.add_parser("node", help="run a raftlog node")
    actions = node.add_subparsers(dest="node_command", required=True)
    start = actions.add_parser(
        "start",
        help="start a node (runs until SIGTERM/SIGINT)",
        description="Flags override RAFTLOG_<FIELD> environment variables, which override "
        "the --config TOML file, which overrides the defaults (docs/configuration.md).",
    )
    start.add_argument("--config", metavar="FILE", help="a TOML file of settings")
    for field in fields(NodeConfig):
        flags = ["--" + field.name.replace("_", "-")]
        if field.name == "listen_address":
            flags.append("--listen")
        start.add_argument(
            *flags,
            dest=field.name,
            default=None,
            metavar=field.name.upper(),
            help=_HELP.get(field.name, f"see docs/configuration.md (RAFTLOG_{field.name.upper()})"),
        )


def run(args: argparse.Namespace) -> int:
    """Validate the configuration, then serve."""
    from raftlog.node.config_sources import FIELD_NAMES, load_config

    overrides = {name: getattr(args, name) for name in FIELD_NAMES}
    config = load_config(args.config, os.environ, overrides)
    warning = config.exposure_warning()
    if warning is not None:
        print(f"raftlog: {warning}", file=sys.stderr)
    from raftlog.node.process import serve

    return serve(config)
