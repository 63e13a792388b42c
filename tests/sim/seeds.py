"""Which seeds, profile and planted bugs a test session runs, from the environment.

Rules: ``SIM_SEED=n`` replays exactly one run (it wins over ``SIM_SEEDS``); ``SIM_SEEDS=n`` soaks
seeds 0..n-1; with neither, a short default keeps a bare ``pytest`` quick. ``SIM_PROFILE`` and
``SIM_BUGS`` (comma-separated PlantedBug values) complete the replay line a failure prints.
"""

from __future__ import annotations

import os

from raftlog.node.replication.planted_bugs import NodePlantedBug
from raftlog.raft.types import PlantedBug

from .options import AnyPlantedBug

DEFAULT_SEED_COUNT = 20


def seeds_from_env() -> list[int]:
    replay = os.environ.get("SIM_SEED")
    if replay:
        return [int(replay)]
    return list(range(int(os.environ.get("SIM_SEEDS", DEFAULT_SEED_COUNT))))


def profile_from_env() -> str:
    return os.environ.get("SIM_PROFILE", "default")


def bugs_from_env() -> frozenset[AnyPlantedBug]:
    names = os.environ.get("SIM_BUGS", "")
    return frozenset(planted_bug(name) for name in names.split(",") if name)


def planted_bug(name: str) -> AnyPlantedBug:
    """The core's or the node's planted bug of that name."""
    try:
        return PlantedBug(name)
    except ValueError:
        return NodePlantedBug(name)
