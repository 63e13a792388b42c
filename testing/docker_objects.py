"""The Docker objects a test run owns: their labels, and finding and removing them.

Every container, network and volume a ``RaftlogCluster`` creates carries
``raftlog.test.run=<run id>`` and ``raftlog.test.owner=<host>:<pid>``, because Ryuk (the
reaper testcontainers would use) needs a registry pull. Rules this module keeps: nothing is
pulled; removal is by label only, so no Docker object without ``raftlog.test.run`` is ever
touched; ``sweep_stale`` removes only runs whose owning process on this host is gone, never a
live run's (another test session running at the same time) nor another host's (its process
cannot be checked from here). Importing it configures testcontainers (Ryuk off) before
anything else reads that setting.
"""

from __future__ import annotations

import os

# Before testcontainers reads its configuration: its reaper image cannot be pulled offline.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import contextlib
import socket
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from testcontainers.core.config import testcontainers_config
from testcontainers.core.docker_client import DockerClient

testcontainers_config.ryuk_disabled = True

LABEL_RUN = "raftlog.test.run"
LABEL_OWNER = "raftlog.test.owner"
# Set to 1 (CI): a test that needs Docker fails when no engine answers, instead of skipping.
REQUIRE_DOCKER_ENV = "RAFTLOG_REQUIRE_DOCKER"


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


def docker_required() -> bool:
    """Whether ``RAFTLOG_REQUIRE_DOCKER`` asks for a failure instead of a skip without Docker."""
    return os.environ.get(REQUIRE_DOCKER_ENV, "").strip().lower() in {"1", "true", "yes"}


def image_present(image: str) -> bool:
    """Whether Docker has ``image`` locally (nothing is pulled)."""
    try:
        docker_client().images.get(image)
    except Exception:  # ImageNotFound, or no engine: either way it cannot be used
        return False
    return True


def missing_image_message(image: str) -> str:
    """The one line every entry point (fixture, RaftlogCluster, chaos) gives for a missing
    image."""
    return f"no image {image!r} in Docker: build it first (make image)"


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


# Why a run's objects are (or are not) a sweep's: its owning process, as seen from here.
OWNER_GONE = "gone"
OWNER_RUNNING = "still running"
OWNER_ELSEWHERE = "another host's (cannot be checked from here)"


@dataclass(frozen=True, slots=True)
class LabelledRun:
    """The labelled Docker objects of one run: its ``owner`` label (``host:pid``), that
    process's state (``OWNER_GONE``: only then may the run be removed), and the objects
    (``"container <name>"``...)."""

    run_id: str
    owner: str
    owner_state: str
    objects: tuple[str, ...]

    @property
    def stale(self) -> bool:
        return self.owner_state == OWNER_GONE


def _labels(obj: Any) -> dict[str, str]:
    attrs = obj.attrs
    return dict((attrs.get("Labels") or attrs.get("Config", {}).get("Labels")) or {})


def _owner_state(owner_label: str, host: str) -> str:
    owner_host, _, pid = owner_label.rpartition(":")
    if owner_host != host or not pid.isdigit():
        return OWNER_ELSEWHERE
    return OWNER_RUNNING if _pid_alive(int(pid)) else OWNER_GONE


def labelled_runs() -> list[LabelledRun]:
    """Every run with labelled objects in Docker, by run id."""
    client = docker_client()
    kinds = (
        ("container", client.containers.list(all=True, filters=_filters(None))),
        ("network", client.networks.list(filters=_filters(None))),
        ("volume", client.volumes.list(filters=_filters(None))),
    )
    owners: dict[str, str] = {}
    objects: dict[str, list[str]] = {}
    for kind, found in kinds:
        for obj in found:
            labels = _labels(obj)
            run_id = labels.get(LABEL_RUN)
            if run_id:
                owners.setdefault(run_id, str(labels.get(LABEL_OWNER, "")))
                objects.setdefault(run_id, []).append(f"{kind} {obj.name}")
    host = socket.gethostname()
    return [
        LabelledRun(
            run_id, owners[run_id], _owner_state(owners[run_id], host), tuple(objects[run_id])
        )
        for run_id in sorted(objects)
    ]


def sweep_stale(run_ids: Collection[str] | None = None) -> list[LabelledRun]:
    """Remove what earlier runs on this host left whose process is gone (of those in
    ``run_ids`` only, when given); returns the runs removed. Runs of live processes (another
    test session right now) and of other hosts are left alone."""
    stale = [
        run for run in labelled_runs() if run.stale and (run_ids is None or run.run_id in run_ids)
    ]
    for run in stale:
        remove_by_label(run.run_id)
    return stale
