"""The read barrier: "everything the group committed before I asked is applied here", for a
member that may be behind (a follower, or a leader still applying its inherited log).

Why: a user creates a topic through the leader, then reads it from another member (a
consumer pinned to a follower, an Admin call that went elsewhere). Raft acknowledged the
topic once a majority stored it; a follower applies it a moment later. Without the barrier
that follower answered NOT_FOUND for a topic the user had just been told exists. A member
that does not know what a read names now passes the barrier once before it says so
(node/services/fresh_read.py).

How: a Raft read index (raft/read_only.py), which a follower forwards to the leader; the
leader confirms it still leads (a heartbeat round) and answers its commit index; the
barrier passes once this member applied that far.

Rules this module keeps:
- A round counts for a waiter only if it was started after the waiter arrived: only then
  does its commit index cover every write acknowledged before the waiter's request.
- At most one round is in flight per member, however many readers wait (a flood of reads
  naming unknown topics costs one heartbeat round at a time, not one each). A waiter whose
  arrival postdates the round in flight waits for it, then for the next.
- A round not answered within ``ROUND_MAX_S`` (a lost message, a leader change) is
  abandoned (its read forgotten on the loop) and the next pass starts another.
- Bounded: ``wait`` returns within its timeout; False when the barrier could not be passed
  (no leader known, no quorum, too slow), and the caller answers from what it holds.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from dataclasses import dataclass, field

from raftlog.node.replication.replica import Replica

# A round older than this is presumed lost (several heartbeat intervals, under one election).
ROUND_MAX_S = 1.0


@dataclass(frozen=True)
class _Round:
    started_at_s: float
    context: bytes
    future: concurrent.futures.Future[object] = field(default_factory=concurrent.futures.Future)


class ReadBarrier:
    """One member's barrier (see the module docstring)."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica
        self._lock = threading.Lock()
        self._round: _Round | None = None

    def wait(self, timeout_s: float) -> bool:
        """Block until this member applied everything committed before the call, or until
        ``timeout_s``; True when it did."""
        arrived_s = time.monotonic()
        deadline_s = arrived_s + timeout_s
        # Two rounds at most: the one in flight (if it started before this call, it may not
        # cover it), then one started after.
        # Bounded: each pass waits until its round answers, fails, or is presumed lost, and
        # the deadline ends the loop.
        while time.monotonic() < deadline_s:
            current = self._current_round()
            round_end_s = min(deadline_s, current.started_at_s + ROUND_MAX_S)
            try:
                current.future.result(timeout=max(0.0, round_end_s - time.monotonic()))
            except concurrent.futures.TimeoutError:
                continue  # presumed lost: the next pass starts another, if time is left
            except Exception:  # no leader known, or the read was refused: not passed
                return False
            if current.started_at_s >= arrived_s:
                return True
        return False

    def _current_round(self) -> _Round:
        now_s = time.monotonic()
        with self._lock:
            current = self._round
            if current is not None and not current.future.done():
                if now_s - current.started_at_s < ROUND_MAX_S:
                    return current
                self._replica.forget_read(current.context)
            current = self._round = _Round(now_s, os.urandom(16))
        self._replica.read_index(current.context, current.future)
        return current
