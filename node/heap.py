"""The node process's heap: how many malloc arenas it uses, and what it gives back once
writes stop.

Under sustained writes a node's memory grows past what it holds at rest: the Raft log keeps
its newest entries in memory (up to 32 MiB), and glibc parks the pages of freed request and
entry buffers in an arena per thread (up to 8 per core), where one thread seldom reuses what
another freed. Neither shrinks by itself when writes stop, so a node that took a burst an
hour ago would still look as large as during it.

Rules this module keeps:
- A node uses at most ``MALLOC_ARENAS`` arenas, set before its first thread starts, unless
  its environment sets ``MALLOC_ARENA_MAX`` (glibc applied that already; the operator's
  choice wins). Measured (docs/PERFORMANCE.md, "Idle release and two arenas"): right after
  2 GiB of 64 KiB writes 149-182 MiB instead of 176-258, and produce throughput the same
  within noise.
- Release happens only after a whole housekeeping tick without a write (the CommitLog's end
  did not move), and once per idle spell: under load a trim would be undone at once, and the
  in-memory entries are what the leader sends and applies next.
- What is dropped is a cache: the Raft log reads dropped entries back from the CommitLog.
- ``malloc_trim`` is glibc's; elsewhere only the caches are dropped.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable

_log = logging.getLogger("raftlog.node")


MALLOC_ARENAS = 2
# glibc's mallopt parameter number for the arena limit (malloc.h).
_M_ARENA_MAX = -8


def _glibc_function(name: str) -> Callable[..., int] | None:
    """``name`` from the C library the interpreter runs on, or None where it has none (musl,
    macOS). The process's own symbols: no library search (which may spawn ldconfig)."""
    try:
        # ctypes.CDLL calls release the GIL: a trim does not stop the Raft loop.
        function: Callable[..., int] = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    return function


_MALLOC_TRIM = _glibc_function("malloc_trim")
_MALLOPT = _glibc_function("mallopt")


def limit_arenas(count: int = MALLOC_ARENAS) -> bool:
    """Cap the malloc arenas at ``count`` (call before the process starts threads), unless
    the environment sets MALLOC_ARENA_MAX; whether this call set the cap."""
    if _MALLOPT is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(_MALLOPT(_M_ARENA_MAX, count))


def trim_heap() -> bool:
    """Hand the free pages of every malloc arena back to the kernel; whether it could."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True


class IdleMemory:
    """Called once per housekeeping tick with the CommitLog's end; drops the caches and trims
    the heap on the first tick of an idle spell."""

    def __init__(self, drop_caches: Callable[[], None]) -> None:
        self._drop_caches = drop_caches
        self._last_end_offset = -1
        self._released = False

    def tick(self, end_offset: int) -> bool:
        """Whether this tick released memory."""
        if end_offset != self._last_end_offset:
            self._last_end_offset = end_offset
            self._released = False
            return False
        if self._released:
            return False
        self._drop_caches()  # raises when the loop is busy: the next idle tick tries again
        self._released = True
        trim_heap()
        _log.debug("idle: caches dropped and the heap trimmed at offset %d", end_offset)
        return True
