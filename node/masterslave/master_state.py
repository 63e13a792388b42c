"""MasterState: what a master-slave master shares between its writers and its slaves' streams.

Writers (the write path) tell it when the CommitLog grew and wait on it for the group to
confirm a write; each slave's stream (ha_service.py) waits on it for new bytes and reports
what the slave stored. It owns the InSyncSet and the one condition every side waits on.

Rules this module keeps:
- A SYNC_MASTER's answer is honest: SEND_OK once ``needed`` replicas (the master included)
  hold the write; SLAVE_NOT_AVAILABLE at once when too few slaves are in sync to ever
  confirm it; FLUSH_SLAVE_TIMEOUT when they did not within the timeout. In the last two the
  write IS stored on the master (RocketMQ's statuses).
- An ASYNC_MASTER answers SEND_OK after its own write (and flush, under SYNC_FLUSH).
- Under a controller the rule is Kafka's ISR rule, so that electing any member of the
  in-sync set never loses an acknowledged write: a write is confirmed once EVERY member of the
  in-sync set the controller agreed to (``set_agreed``) holds it, and that set must have
  ``needed`` members; a slave is proposed for the set only once it holds everything already
  confirmed, and a lagging one stops counting only after the controller agreed to drop it.
- Every wait is bounded by its timeout and ends at once on ``close``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from raftlog.node.masterslave.in_sync import InSyncSet, SlaveLag

SEND_OK = "SEND_OK"
FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class MasterState:
    def __init__(
        self,
        in_sync: InSyncSet,
        master_end: Callable[[], int],
        *,
        synchronous: bool,
        log_end: Callable[[], int] | None = None,
        now_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        """``master_end``: the offset the master itself holds (its flushed end under
        SYNC_FLUSH, its written end otherwise); ``log_end``: where its CommitLog ends, written
        or not (what the streams may send; default ``master_end``)."""
        self._in_sync = in_sync
        self._master_end = master_end
        self._log_end = log_end if log_end is not None else master_end
        self._synchronous = synchronous
        self._now_ms = now_ms
        self._changed = threading.Condition()
        self._closed = False
        # Controller mode: the in-sync set the controller agreed to (None: static mode).
        self._agreed: frozenset[str] | None = None
        self._self_id = ""
        # Called (outside the lock) when the confirmed offset moves: readers may see more.
        self.on_confirmed: Callable[[], None] | None = None
        # The confirmed offset's high-water mark: what the group held once stays confirmed
        # when a slave later drops out of the in-sync set.
        self._confirmed = 0

    # -- writers ------------------------------------------------------------------------------

    def written(self) -> None:
        """The CommitLog grew: wake the slaves' streams."""
        with self._changed:
            self._changed.notify_all()

    def wait_replicated(self, end_offset: int, timeout_s: float) -> str:
        """How the write ending at ``end_offset`` stands: SEND_OK, FLUSH_SLAVE_TIMEOUT or
        SLAVE_NOT_AVAILABLE (see the module docstring)."""
        if not self._synchronous:
            return SEND_OK
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                master_end, now_ms = self._master_end(), self._now_ms()
                if self._confirm(master_end, now_ms) >= end_offset:
                    return SEND_OK
                if not self._can_confirm(master_end, now_ms):
                    return SLAVE_NOT_AVAILABLE
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return FLUSH_SLAVE_TIMEOUT
                self._changed.wait(remaining)

    # -- slaves' streams ----------------------------------------------------------------------

    def slave_reported(
        self, node_id: str, acked_offset: int, sent_end_offset: int, sent_at_ms: int
    ) -> None:
        with self._changed:
            before = self._confirmed
            self._in_sync.report(node_id, acked_offset, sent_end_offset, sent_at_ms)
            moved = self._confirm(self._master_end(), self._now_ms()) > before
            self._changed.notify_all()
        if moved and self.on_confirmed is not None:
            self.on_confirmed()

    # -- controller mode ----------------------------------------------------------------------

    def set_agreed(self, self_id: str, in_sync: frozenset[str]) -> None:
        """The in-sync set the controller now holds for this master."""
        with self._changed:
            self._self_id, self._agreed = self_id, in_sync
            self._changed.notify_all()

    def proposed_in_sync(self, self_id: str) -> frozenset[str]:
        """What this master would have the controller hold: itself, and every slave in sync
        (within the lag bounds) that holds everything already confirmed. An ASYNC_MASTER
        confirms its own end at once, so for it "in sync" is the lag bounds alone (Kafka's
        ISR with acks=1): a slave never holds the very end of a log that keeps growing, and
        requiring it would leave the master alone in the set, never to be replaced."""
        with self._changed:
            master_end, now_ms = self._master_end(), self._now_ms()
            confirmed = self._confirm(master_end, now_ms) if self._synchronous else 0
            return frozenset(
                {self_id}
                | {
                    node_id
                    for node_id in self._in_sync.in_sync(master_end, now_ms)
                    if self._in_sync.acked(node_id) >= confirmed
                }
            )

    def election_safe(self, end_offset: int) -> bool:
        """Whether no election can take back the log up to ``end_offset``: in static mode
        (no elections), for an ASYNC_MASTER (its contract allows the loss), or once every
        slave of the in-sync set the controller holds has it (the next master comes from
        that set), even when the set is smaller than ``min_in_sync_replicas``."""
        with self._changed:
            agreed = self._agreed
            if agreed is None or not self._synchronous:
                return True
            return all(self._in_sync.acked(n) >= end_offset for n in agreed if n != self._self_id)

    def _can_confirm(self, master_end: int, now_ms: int) -> bool:
        if self._agreed is not None:
            return len(self._agreed) >= self._in_sync.needed
        return self._in_sync.can_confirm(master_end, now_ms)

    def slave_gone(self, node_id: str) -> None:
        with self._changed:
            self._in_sync.disconnect(node_id)
            self._changed.notify_all()

    def wait_for_bytes(self, past_offset: int, timeout_s: float) -> None:
        """Block until the master's log ends past ``past_offset``, ``close``, or the timeout."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or self._log_end() > past_offset, timeout_s)

    # -- views --------------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self._now_ms()

    def _confirm(self, master_end: int, now_ms: int) -> int:
        if not self._synchronous:
            return master_end
        agreed = self._agreed
        if agreed is None:
            confirmed = self._in_sync.confirmed_offset(master_end, now_ms)
        elif len(agreed) < self._in_sync.needed:
            confirmed = 0
        else:
            confirmed = min(
                [master_end] + [self._in_sync.acked(n) for n in agreed if n != self._self_id]
            )
        self._confirmed = max(self._confirmed, confirmed)
        return self._confirmed

    def confirmed_offset(self) -> int:
        with self._changed:
            return self._confirm(self._master_end(), self._now_ms())

    def lags(self) -> list[SlaveLag]:
        with self._changed:
            return self._in_sync.lags(self._master_end(), self._now_ms())

    def in_sync_ids(self) -> list[str]:
        with self._changed:
            return self._in_sync.in_sync(self._master_end(), self._now_ms())

    @property
    def synchronous(self) -> bool:
        return self._synchronous

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
