"""The Docker objects a test run owns: their labels, and finding and removing them.

Every container, network and volume a ``RaftlogCluster`` creates carries
``raftlog.test.run=<run id>`` and ``raftlog.test.owner=<host>:<pid>``, because Ryuk (the
reaper testcontainers would use) needs a registry pull. Rules this module keeps: nothing is
pulled; removal is by label only; ``sweep_stale`` removes only runs whose owning process on
this host is gone, never a live run's (another test session running at the same time).
Importing it configures testcontainers (Ryuk off) before anything else reads that setting.
"""

from __future__ import annotations

import os

# Before testcontainers reads its configuration: its reaper image cannot be pulled offline.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import contextlib
import socket
from typing import Any

from testcontainers.core.config import testcontainers_config
from testcontainers.core.docker_client import DockerClient

testcontainers_config.ryuk_disabled = True

LABEL_RUN = "raftlog.test.run"
LABEL_OWNER = "raftlog.test.owner"


def docker_client() -> Any:
    """The docker SDK client testcontainers uses (untyped)."""
    return DockerClient().client


def docker_available() -> str | None:
    """None when a Docker engine answers; otherwise why not (for a skip reason)."""
    try:
        docker_client().ping()
    except Exception as error:  # any failure to reach the engine is a reason to skip
        return f"no Docker engine answers ({type(error).__name__}: {error})"
    return None


def image_present(image: str) -> bool:
    """Whether Docker has ``image`` locally (nothing is pulled)."""
    try:
        docker_client().images.get(image)
    except Exception:  # ImageNotFound, or no engine: either way it cannot be used
        return False
    return True


def owner() -> str:
    """This process, as the owner label names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _filters(run_id: str | None) -> dict[str, str]:
    return {"label": f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN}


def remove_by_label(run_id: str) -> None:
    """Remove the containers, networks and volumes labelled ``raftlog.test.run=<run_id>``."""
    client = docker_client()
    filters = _filters(run_id)
    for container in client.containers.list(all=True, filters=filters):
        with contextlib.suppress(Exception):
            container.remove(force=True, v=True)
    for network in client.networks.list(filters=filters):
        with contextlib.suppress(Exception):
            network.reload()
            for attached in network.containers:
                network.disconnect(attached, force=True)
            network.remove()
    for volume in client.volumes.list(filters=filters):
        with contextlib.suppress(Exception):
            volume.remove(force=True)


def leftovers(run_id: str | None = None) -> list[str]:
    """What is still there with the run's label (any run's when ``run_id`` is None):
    ``"container <name>"``, ``"network <name>"``, ``"volume <name>"``."""
    client = docker_client()
    filters = _filters(run_id)
    found = [f"container {c.name}" for c in client.containers.list(all=True, filters=filters)]
    found += [f"network {n.name}" for n in client.networks.list(filters=filters)]
    found += [f"volume {v.name}" for v in client.volumes.list(filters=filters)]
    return found


def sweep_stale() -> list[str]:
    """Remove what earlier runs on this host left whose process is gone; returns their run
    ids. Runs of live processes (another test session right now) are left alone."""
    client = docker_client()
    host = socket.gethostname()
    stale: set[str] = set()
    objects = [
        *client.containers.list(all=True, filters=_filters(None)),
        *client.networks.list(filters=_filters(None)),
        *client.volumes.list(filters=_filters(None)),
    ]
    for obj in objects:
        labels = (obj.attrs.get("Labels") or obj.attrs.get("Config", {}).get("Labels")) or {}
        run_id = labels.get(LABEL_RUN)
        owner_host, _, pid = str(labels.get(LABEL_OWNER, "")).rpartition(":")
        if run_id and owner_host == host and pid.isdigit() and not _pid_alive(int(pid)):
            stale.add(run_id)
    for run_id in sorted(stale):
        remove_by_label(run_id)
    return sorted(stale)
