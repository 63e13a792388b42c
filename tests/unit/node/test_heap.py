"""The node's heap (node/heap.py): idle release once per idle spell, glibc's calls made for
real in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from raftlog.node.heap import IdleMemory, trim_heap


def test_idle_memory_drops_the_caches_once_per_idle_spell() -> None:
    drops: list[int] = []
    idle = IdleMemory(lambda: drops.append(1))
    assert [idle.tick(end) for end in (0, 10, 20)] == [False, False, False]  # writes go on
    assert idle.tick(20) is True  # a whole tick without a write
    assert [idle.tick(20) for _ in range(3)] == [False] * 3  # already released
    assert idle.tick(35) is False and idle.tick(35) is True  # written, then idle again
    assert len(drops) == 2


def test_a_failed_cache_drop_is_retried_on_the_next_idle_tick() -> None:
    calls: list[int] = []

    def drop() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError("the raft loop did not answer")

    idle = IdleMemory(drop)
    idle.tick(5)
    with pytest.raises(TimeoutError):
        idle.tick(5)
    assert idle.tick(5) is True
    assert len(calls) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_trim_and_the_arena_cap_run_in_a_fresh_process() -> None:
    assert trim_heap() is True
    script = (
        "from raftlog.node.heap import limit_arenas, trim_heap\n"
        "print(limit_arenas(), trim_heap())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    capped = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert capped.stdout.split() == ["True", "True"], capped.stderr
    # The operator's MALLOC_ARENA_MAX wins: glibc applied it, the node leaves it.
    env["MALLOC_ARENA_MAX"] = "4"
    kept = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert kept.stdout.split() == ["False", "True"], kept.stderr
