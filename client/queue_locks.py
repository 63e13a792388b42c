"""Orderly consumption's queue locks, on the member's side: which queues this member may
consume now (RocketMQ's ProcessQueue lock with its lockBatchMQ / unlockBatchMQ calls). The
leader keeps the lock table (node/messaging/queue_lock_table.py, which says why one holder
per queue survives a failover); this module decides when to ask and how long to trust an
answer.

Rules this module keeps:
- A lock is trusted until ``sent + lease * (1 - LEASE_MARGIN)`` on this process's monotonic
  clock, where ``sent`` is when the LockQueues call that granted or renewed it was SENT. The
  leader counts the lease from when the call arrived, which is later, so this member always
  stops before the leader may hand the queue to another; the margin absorbs clock-rate
  differences. A lock is never trusted longer because a renewal is merely hoped for.
- ``usable`` lists only queues with at least ``lease * USABLE_MARGIN`` left, so a batch is
  not handed out on a lock about to end (handle a batch well within that time).
- Held locks are renewed every ``lease / 3`` (RocketMQ renews its 30 s locks every 20 s);
  a wanted queue not held is asked for again every ``LOCK_RETRY_S``, or when a new leader
  said it grants locks again (``retry_after_ms``). A failed call is logged (rate-limited)
  and retried after ``LOCK_RETRY_S``; the locks keep their own ends meanwhile.
- The consumer's polling thread calls it; ``usable`` and ``may_use`` may also be called
  from other threads (a push consumer's listeners): the table is replaced, never changed
  in place, so a reader always sees a whole one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from raftlog.client.errors import RaftlogError
from raftlog.client.rate_limited_log import RateLimitedLog
from raftlog.proto import client_pb2

_log = logging.getLogger(__name__)

LEASE_MARGIN = 0.1
USABLE_MARGIN = 0.1
RENEWALS_PER_LEASE = 3
LOCK_RETRY_S = 1.0

# call(method, request) -> response: one leader-only attempt (the caller bounds its time).
Call = Callable[[str, Any], Any]


class QueueLocks:
    """The locks one member holds on one topic's queues for its group (see the module)."""

    def __init__(
        self,
        call: Call,
        group: str,
        topic: str,
        member_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._call = call
        self._group = group
        self._topic = topic
        self._member_id = member_id
        self._clock = clock
        # queue id -> until when (monotonic s) this member trusts its lock.
        self._trusted_until_s: dict[int, float] = {}
        self.lease_s: float | None = None  # learned from the first answer
        self._renew_at_s = 0.0
        self._retry_at_s = 0.0
        self._failures = RateLimitedLog(_log)

    def usable(self) -> set[int]:
        """The queues this member may start consuming now."""
        lease_s, trusted = self.lease_s, self._trusted_until_s
        if lease_s is None:
            return set()
        now_s = self._clock()
        return {q for q, until_s in trusted.items() if until_s - now_s >= lease_s * USABLE_MARGIN}

    def may_use(self, queue_id: int) -> bool:
        """Whether ``queue_id``'s lock may be used now (as ``usable``, for one queue)."""
        lease_s, until_s = self.lease_s, self._trusted_until_s.get(queue_id)
        if lease_s is None or until_s is None:
            return False
        return until_s - self._clock() >= lease_s * USABLE_MARGIN

    def refresh(self, wanted: Iterable[int]) -> None:
        """Lock the ``wanted`` queues not held and renew those held, when it is time to."""
        wanted_ids = sorted(set(wanted))
        now_s = self._clock()
        missing = set(wanted_ids) - self.usable()
        due = now_s >= self._renew_at_s or (missing and now_s >= self._retry_at_s)
        if not wanted_ids or not due:
            return
        request = client_pb2.LockQueuesRequest(
            group=self._group, client_id=self._member_id, topic=self._topic, queue_ids=wanted_ids
        )
        sent_s = self._clock()
        try:
            response = self._call("LockQueues", request)
        except RaftlogError as error:
            self._failures.warning("queue locks of %s: %s; asked again shortly", self._topic, error)
            self._retry_at_s = self._renew_at_s = self._clock() + LOCK_RETRY_S
            return
        self.lease_s = response.lease_ms / 1000
        trusted_until_s = sent_s + self.lease_s * (1 - LEASE_MARGIN)
        trusted = dict(self._trusted_until_s)
        for queue_id in response.locked_queue_ids:
            trusted[queue_id] = trusted_until_s
        # Forget ended locks (a queue held by another member stays out until it is free).
        now_s = self._clock()
        self._trusted_until_s = {q: u for q, u in trusted.items() if u > now_s}
        wait_s = response.retry_after_ms / 1000 if response.retry_after_ms else LOCK_RETRY_S
        self._retry_at_s = now_s + wait_s
        self._renew_at_s = sent_s + self.lease_s / RENEWALS_PER_LEASE
        if response.retry_after_ms:
            self._renew_at_s = self._retry_at_s

    def release(self, queue_ids: Iterable[int]) -> None:
        """Give these locks back (their offsets are committed): another member may take the
        queues at once. A failure is logged; the locks then end with their leases."""
        held = sorted(set(queue_ids) & set(self._trusted_until_s))
        self._trusted_until_s = {
            q: u for q, u in self._trusted_until_s.items() if q not in set(held)
        }
        if not held:
            return
        request = client_pb2.UnlockQueuesRequest(
            group=self._group, client_id=self._member_id, topic=self._topic, queue_ids=held
        )
        try:
            self._call("UnlockQueues", request)
        except RaftlogError as error:
            self._failures.warning("unlocking queues of %s: %s", self._topic, error)

    def forget(self) -> None:
        """Drop every lock without a call (the member left the group, which releases them)."""
        self._trusted_until_s = {}
