"""QueueHandover: moves a clustering consumer's positions to the queues its rebalance plan
(client/rebalance.py) says it reads now, and hands the others over to the group.

Rules this module keeps:
- A queue is given up in this order: the consumer stops reading it (a revoke listener, the
  push consumer's, first waits for what its listener is running on it and says how far is
  done), its offset is committed, its position is dropped, and only then its lock is
  released; so the next owner, which locks it before it fetches the committed offset,
  starts where this member stopped. A failed commit is logged and the queue is still given
  up (the next owner then repeats from the last commit: at-least-once).
- A queue is taken at the group's committed offset (its first live offset when there is
  none); ``from_beginning`` applies to the first queues taken only, so a queue moved
  between members never starts over. A failed take is logged and tried again at the next
  poll (the plan still wants the queue).
- Orderly: messages are handed over only while their queue's lock is usable; otherwise the
  queue's position goes back to them (``still_locked``).
- Runs on the consumer's polling thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from raftlog.client.errors import RaftlogError
from raftlog.client.messages import Message
from raftlog.client.rate_limited_log import RateLimitedLog
from raftlog.client.rebalance import Rebalance

_log = logging.getLogger(__name__)

# (queue ids given up, their positions) -> the offsets to commit for them.
RevokeListener = Callable[[list[int], dict[int, int]], Mapping[int, int]]
# (queue id -> first live offset, from_beginning) -> queue id -> where to start.
StartQueues = Callable[[Mapping[int, int], bool], dict[int, int]]


class QueueHandover:
    """Applies ``plan`` to a consumer's positions (see the module docstring)."""

    def __init__(
        self,
        plan: Rebalance,
        start: StartQueues,
        commit: Callable[[Mapping[int, int]], object],
        forget: Callable[[list[int]], None],
        from_beginning: bool,
    ) -> None:
        self.plan = plan
        self._start = start
        self._commit = commit
        self._forget = forget
        self._from_beginning = from_beginning
        self.revoke_listener: RevokeListener | None = None
        self._failures = RateLimitedLog(_log)

    def apply(self, positions: dict[int, int]) -> None:
        """Give up and take queues until ``positions`` covers what the plan wants now."""
        target = self.plan.target(positions)
        if target is None:
            return
        gone = sorted(set(positions) - target)
        if gone:
            self._give_up(gone, positions)
        new = {q: self.plan.bounds.get(q, 0) for q in sorted(target - set(positions))}
        try:
            positions.update(self._start(new, self._from_beginning))
        except RaftlogError as error:
            self._failures.warning("%s: starting queues %s failed: %s", self.plan.topic, new, error)
            return
        self._from_beginning = False

    def _give_up(self, queue_ids: list[int], positions: dict[int, int]) -> None:
        offsets = {q: positions[q] for q in queue_ids}
        if self.revoke_listener is not None:
            offsets = dict(self.revoke_listener(queue_ids, offsets))
        try:
            self._commit(offsets)
        except RaftlogError as error:
            self._failures.warning(
                "%s: committing queues %s before giving them up failed: %s",
                self.plan.topic,
                queue_ids,
                error,
            )
        self._forget(queue_ids)
        self.plan.released(queue_ids)

    def still_locked(
        self, queue_id: int, messages: list[Message], positions: dict[int, int]
    ) -> bool:
        """Orderly: whether ``messages`` of ``queue_id`` may be handed over now; if not, the
        queue's position goes back to the first of them."""
        locks = self.plan.locks
        if locks is None or not messages or queue_id in locks.usable():
            return True
        positions[queue_id] = messages[0].queue_offset
        return False
