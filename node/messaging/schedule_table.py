"""ScheduleTable: how far the delay scheduler got in each schedule queue, as every replica
learns it from the log.

State per schedule queue: ``low`` (every queue offset below it is done: delivered, or skipped
as undeliverable) and ``delivered`` (offsets at or past ``low`` already delivered: the timer
queue's messages come due out of arrival order; a level queue's never do, so its set stays
empty). The scheduler's ``ScheduleProgress`` control record leads the entry that holds the
copies it delivered (node/control.py), and ``apply`` runs when that entry is applied, so the
table and the delivered copies agree at every point of the log: a new leader resumes exactly
where the committed log says, neither losing nor repeating a delivery.

Rules this module keeps:
- ``apply`` is idempotent and monotonic (``low`` only grows; the set keeps only offsets at or
  past ``low``), so replaying the retained log on a restart rebuilds the table (a restart
  from the applied-state checkpoint restores it and replays only what follows). A progress
  record retention deleted lies after the message it delivered, so that message is deleted
  too: the scheduler also starts no lower than the queue's first live offset.
- Written on the Raft loop, read by the scheduler's thread: every access holds the lock.
- Each queue's ``low`` is mirrored as the offset of the consumer group ``SCHEDULE_GROUP`` on
  that schedule queue (``store_offsets``, applied with the progress), so it is durable in
  the store and travels in a snapshot's control state: a member that installed a snapshot
  resumes every level queue where its leader was. The timer queue's out-of-order
  deliveries above ``low`` are not mirrored (a snapshot does not carry them yet).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from raftlog.node.control import CommitOffsets, ScheduleProgress
from raftlog.store.hashing import SCHEDULE_TOPIC

SCHEDULE_GROUP = "__raftlog_schedule"
"""The consumer group whose offsets of the schedule topic mirror each queue's ``low``."""


class ScheduleTable:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._low: dict[int, int] = {}
        self._delivered: dict[int, set[int]] = {}

    def apply(self, progress: ScheduleProgress) -> None:
        """A committed progress record (every replica, in log order)."""
        with self._lock:
            for queue_id, low, delivered in progress.queues:
                new_low = max(self._low.get(queue_id, 0), low)
                done = self._delivered.get(queue_id, set())
                done.update(delivered)
                if new_low != self._low.get(queue_id, 0):
                    done = {offset for offset in done if offset >= new_low}
                self._low[queue_id] = new_low
                if done:
                    self._delivered[queue_id] = done
                else:
                    self._delivered.pop(queue_id, None)

    def export(self) -> dict[str, object]:
        """The table as JSON values: what the applied-state checkpoint keeps
        (node/replication/applied_state.py)."""
        with self._lock:
            return {
                "low": [[queue_id, low] for queue_id, low in sorted(self._low.items())],
                "delivered": [
                    [queue_id, sorted(done)] for queue_id, done in sorted(self._delivered.items())
                ],
            }

    def restore(self, exported: object) -> None:
        """Replace the table by what ``export`` returned (a restart from the checkpoint);
        ValueError, nothing changed, when it is not of that shape."""
        if not isinstance(exported, dict):
            raise ValueError(f"not an exported schedule table: {type(exported).__name__}")
        try:
            low = {int(queue_id): int(value) for queue_id, value in exported["low"]}
            delivered = {
                int(queue_id): {int(offset) for offset in done}
                for queue_id, done in exported["delivered"]
            }
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not an exported schedule table: {error!r}") from error
        with self._lock:
            self._low, self._delivered = low, delivered

    def low(self, queue_id: int) -> int:
        with self._lock:
            return self._low.get(queue_id, 0)

    def progress(self, queue_id: int) -> tuple[int, frozenset[int]]:
        """``(low, delivered)`` of ``queue_id`` (a copy)."""
        with self._lock:
            return self._low.get(queue_id, 0), frozenset(self._delivered.get(queue_id, ()))

    def low_after(
        self, queue_id: int, done: Iterable[int], at_least: int, end: int
    ) -> tuple[int, tuple[int, ...]]:
        """Where ``low`` of ``queue_id`` moves once ``done`` is done too (starting no lower
        than ``at_least``, the queue's first live offset), and the done offsets at or past it
        to record: the leader's half of a ``ScheduleProgress``."""
        with self._lock:
            low = max(self._low.get(queue_id, 0), at_least)
            delivered = self._delivered.get(queue_id, set())
            batch = set(done)
            while low < end and (low in batch or low in delivered):
                low += 1
            return low, tuple(sorted(offset for offset in batch if offset >= low))


def store_offsets(progress: ScheduleProgress) -> CommitOffsets:
    """The store's mirror of ``progress``: each queue's ``low`` as ``SCHEDULE_GROUP``'s
    offset of that schedule queue."""
    return CommitOffsets(
        SCHEDULE_GROUP,
        tuple((SCHEDULE_TOPIC, queue_id, low) for queue_id, low, _ in progress.queues),
    )
