"""Queue locks for orderly consumption: which member of a consumer group may consume each
queue of a topic now (RocketMQ's RebalanceLockManager), kept by the leader in memory and
served through Consumer.LockQueues / UnlockQueues (node/services/group_coordinator.py).

Rules this module keeps:
- One holder per (group, topic, queue): a lock is granted when the queue is free, its lease
  ended, or the asker already holds it (a renewal); it lasts ``lease_s`` from when the
  request reached the leader (``now_s``). Only the holder unlocks it; a member leaving the
  group releases all of its locks. A member that dies simply stops renewing: its locks end
  with their leases (never earlier, since a member cut off from the leader may still be
  consuming until its own lease ends).
- The client counts the lease from when it SENT the request, less a margin
  (client/queue_locks.py), so it stops consuming before the leader can think the lock free.

The failover rule (why order holds across a leader change):
- Before a grant or renewal, the leader confirms that it still leads, after the request
  arrived (a read-index round: a quorum acknowledged it). A newer leader's election needs
  the vote of a member of that quorum, cast after its acknowledgement, so every grant an old
  leader makes arrives before any newer leader takes over, and every old lease ends less
  than ``lease_s`` after the takeover.
- So a new leader grants nothing for ``lease_s`` after it took over
  (``start_leadership``; the caller starts it when it first serves a lock or heartbeat call
  as leader, which is no earlier than its election, so the wait is if anything longer).
  Its table starts empty; the old holders' leases run out meanwhile, and their renewals
  (``retry_after_s`` > 0 until then) get the queues back from it afterwards.
- Why not carry the locks over instead: through the log, every renewal of every member
  would be a Raft entry, and a lease's end stamped by the old leader's clock means nothing
  on the new leader's; as claims sent by the members ("I hold queue 3"), a delayed claim of
  a holder whose lease already ended cannot be told from a live one. Waiting costs an
  orderly queue one lease of pause per failover at most (RocketMQ's consumers wait out
  their lease too when a broker's lock table is lost).
- Clocks: only durations on monotonic clocks are compared, never timestamps across
  machines; their rates must differ by less than the client's margin (10% of the lease).
- Master-slave mode has no read index: a master confirms only that it believes it is the
  master, so there the rule holds only if a deposed master learns it within a lease.

Also: pure (the clock is a parameter), not thread-safe (the caller serialises calls), and
bounded: at most ``max_locks`` locks; at the bound the ended ones are dropped first, then a
new lock is refused (OverloadedError: RESOURCE_EXHAUSTED naming the setting).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from raftlog.node.errors import OverloadedError

_Key = tuple[str, str, int]  # (group, topic, queue id)


@dataclass(frozen=True, slots=True)
class LockGrant:
    """What a LockQueues call gets: the asked queues the member holds now, sorted, or (a new
    leader waiting out the old leases) none and how long until it grants."""

    locked_queue_ids: list[int]
    retry_after_s: float = 0.0


@dataclass(slots=True)
class _Lock:
    client_id: str
    expires_at_s: float


class QueueLockTable:
    """The leader's queue locks (see the module docstring)."""

    def __init__(self, lease_s: float, max_locks: int) -> None:
        if lease_s <= 0 or max_locks <= 0:
            raise ValueError(f"lease_s {lease_s} and max_locks {max_locks} must be positive")
        self.lease_s = lease_s
        self._max_locks = max_locks
        self._locks: dict[_Key, _Lock] = {}
        # No grant before this (monotonic s): the previous leader's leases may still run.
        self._grants_from_s = float("inf")

    def __len__(self) -> int:
        return len(self._locks)

    def start_leadership(self, now_s: float) -> None:
        """This node took over as leader at ``now_s`` (or later): forget every lock and
        grant none before the leases an earlier leader gave can have ended."""
        self._locks.clear()
        self._grants_from_s = now_s + self.lease_s

    def stop_leadership(self) -> None:
        """This node no longer leads: forget every lock and grant nothing."""
        self._locks.clear()
        self._grants_from_s = float("inf")

    def wait_s(self, now_s: float) -> float:
        """How long from ``now_s`` until this leader grants locks (0: it does now)."""
        return max(0.0, self._grants_from_s - now_s)

    def lock(
        self, group: str, topic: str, queue_ids: Iterable[int], client_id: str, now_s: float
    ) -> LockGrant:
        """Grant or renew ``client_id``'s locks on ``queue_ids`` where no other member holds
        a live one; ``now_s``: when the request arrived (after that, leadership confirmed)."""
        if now_s < self._grants_from_s:
            return LockGrant([], retry_after_s=self._grants_from_s - now_s)
        locked: list[int] = []
        for queue_id in sorted(set(queue_ids)):
            key = (group, topic, queue_id)
            held = self._locks.get(key)
            if held is not None and held.client_id != client_id and held.expires_at_s > now_s:
                continue
            if held is None:
                self._make_room(now_s)
            self._locks[key] = _Lock(client_id, now_s + self.lease_s)
            locked.append(queue_id)
        return LockGrant(locked)

    def unlock(self, group: str, topic: str, queue_ids: Iterable[int], client_id: str) -> list[int]:
        """Release the locks ``client_id`` holds among ``queue_ids``; returns them, sorted."""
        released: list[int] = []
        for queue_id in sorted(set(queue_ids)):
            key = (group, topic, queue_id)
            held = self._locks.get(key)
            if held is not None and held.client_id == client_id:
                del self._locks[key]
                released.append(queue_id)
        return released

    def release_client(self, group: str, client_id: str) -> int:
        """Release every lock ``client_id`` holds in ``group`` (it left); returns how many."""
        keys = [
            key
            for key, held in self._locks.items()
            if key[0] == group and held.client_id == client_id
        ]
        for key in keys:
            del self._locks[key]
        return len(keys)

    def holder(self, group: str, topic: str, queue_id: int, now_s: float) -> str | None:
        """Who holds the queue's lock at ``now_s`` (None: nobody, or its lease ended)."""
        held = self._locks.get((group, topic, queue_id))
        return held.client_id if held is not None and held.expires_at_s > now_s else None

    def _make_room(self, now_s: float) -> None:
        if len(self._locks) < self._max_locks:
            return
        for key in [k for k, held in self._locks.items() if held.expires_at_s <= now_s]:
            del self._locks[key]
        if len(self._locks) >= self._max_locks:
            raise OverloadedError(
                f"{len(self._locks)} queue locks are held on this node; the limit is "
                f"{self._max_locks} (max_queue_locks)"
            )
