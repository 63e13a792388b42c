"""The state file of a local cluster, ``<base_dir>/cluster.json``: its nodes (id, port, data
directory, PID) and the settings they were started with, so ``raftlog cluster down|status``
(another process) finds what ``cluster up`` started.

Rules this module keeps: the file is replaced atomically (write a temporary, then rename);
reading validates every field's type, so a damaged file is an error, never a wrong PID.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from raftlog.testing.node_probes import HOST

CLUSTER_FILE = "cluster.json"
_VERSION = 1


@dataclass
class LocalNode:
    """One node of the local cluster: its id, client and peer ports, data directory and
    process id."""

    node_id: str
    port: int
    data_dir: str
    pid: int | None = None
    peer_port: int = 0

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"{HOST}:{self.port}"

    @property
    def peer_address(self) -> str:
        """``127.0.0.1:<peer port>``: where other nodes reach its peer port."""
        return f"{HOST}:{self.peer_port}"


def write_state(base_dir: str, settings: dict[str, Any], nodes: list[LocalNode]) -> None:
    """Write ``settings`` and ``nodes`` to ``<base_dir>/cluster.json``, atomically."""
    os.makedirs(base_dir, exist_ok=True)
    document = {
        "version": _VERSION,
        **settings,
        "nodes": [
            {
                "node_id": n.node_id,
                "port": n.port,
                "peer_port": n.peer_port,
                "data_dir": n.data_dir,
                "pid": n.pid,
            }
            for n in nodes
        ],
    }
    path = os.path.join(base_dir, CLUSTER_FILE)
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(document, handle, indent=2)
    os.replace(temporary, path)


def read_state(base_dir: str) -> tuple[dict[str, Any], list[LocalNode]]:
    """The settings and nodes in ``<base_dir>/cluster.json``. Raises FileNotFoundError, or
    ValueError/KeyError/TypeError for a malformed file."""
    with open(os.path.join(base_dir, CLUSTER_FILE)) as handle:
        document: dict[str, Any] = json.load(handle)
    nodes = [
        LocalNode(
            node_id=str(n["node_id"]),
            port=int(n["port"]),
            data_dir=str(n["data_dir"]),
            pid=None if n.get("pid") is None else int(n["pid"]),
            peer_port=int(n.get("peer_port", 0)),
        )
        for n in document["nodes"]
    ]
    if not nodes:
        raise ValueError("the file lists no node")
    settings = {k: v for k, v in document.items() if k not in ("version", "nodes")}
    return settings, nodes
