"""The live members of consumer groups, per topic: the leader's in-memory registry that
Consumer.Heartbeat answers from (clustering consumption, docs/messaging.md "Clustering and
rebalance"). Every member allocates the topic's queues over the members listed here, by the
same pure function (client/allocation.py), so each queue has one owner once they agree.

Rules this module keeps:
- Soft state, never through the log: a member is live until ``MISSED_HEARTBEATS`` of its own
  heartbeat intervals pass without a heartbeat, or until it leaves. The registry lives and
  dies with one leadership; a new leader starts empty and learns every live member within
  one interval, because each member's next heartbeat goes to it (the client follows the
  redirect). Replicating it would cost a Raft entry per member per interval for state that
  is stale within seconds anyway.
- Pure: the clock is a parameter (monotonic seconds), so tests drive time.
- Bounded: at most ``max_members`` (group, topic, member) entries. A heartbeat that would add
  one past that first drops every expired entry, then is refused (OverloadedError:
  RESOURCE_EXHAUSTED naming the setting) if there is still no room; a known member is always
  refreshed.
- Answers are sorted, so every member sees the same list and computes the same allocation.
- Not thread-safe: the caller (node/services/group_coordinator.py) serialises calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.node.errors import OverloadedError

# RocketMQ drops a client whose channel was idle for 120 s with 30 s heartbeats: 4 missed.
# Three keeps a dead member's queues idle for less time; one lost heartbeat never drops one.
MISSED_HEARTBEATS = 3


class GroupMembers:
    """(group, topic) -> member id -> when it expires (see the module docstring)."""

    def __init__(self, max_members: int) -> None:
        if max_members <= 0:
            raise ValueError(f"max_members must be positive, got {max_members}")
        self._max_members = max_members
        self._expiry_s: dict[tuple[str, str], dict[str, float]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def heartbeat(
        self,
        group: str,
        client_id: str,
        topics: Sequence[str],
        interval_s: float,
        now_s: float,
        *,
        leaving: bool = False,
    ) -> dict[str, list[str]]:
        """Record that ``client_id`` consumes ``topics`` for ``group`` (or, ``leaving``, that
        it left them); answers each topic's live members, sorted."""
        expires_at_s = now_s + MISSED_HEARTBEATS * interval_s
        for topic in topics:
            members = self._live(group, topic, now_s)
            if leaving:
                if members.pop(client_id, None) is not None:
                    self._count -= 1
                continue
            if client_id not in members:
                self._make_room(now_s)
                members = self._live(group, topic, now_s)  # making room may drop the entry
                self._count += 1
            members[client_id] = expires_at_s
        answer = {topic: self.members(group, topic, now_s) for topic in topics}
        for topic in topics:
            if not self._expiry_s.get((group, topic), True):
                del self._expiry_s[(group, topic)]
        return answer

    def members(self, group: str, topic: str, now_s: float) -> list[str]:
        """``group``'s live members on ``topic``, sorted."""
        return sorted(self._live(group, topic, now_s))

    def clear(self) -> None:
        """Forget every member (this node stopped leading)."""
        self._expiry_s.clear()
        self._count = 0

    def _live(self, group: str, topic: str, now_s: float) -> dict[str, float]:
        """The (group, topic) entry with its expired members dropped (created if missing)."""
        members = self._expiry_s.setdefault((group, topic), {})
        expired = [member for member, expires_s in members.items() if expires_s <= now_s]
        for member in expired:
            del members[member]
        self._count -= len(expired)
        return members

    def _make_room(self, now_s: float) -> None:
        if self._count < self._max_members:
            return
        for key in list(self._expiry_s):
            self._live(*key, now_s)
            if not self._expiry_s[key]:
                del self._expiry_s[key]
        if self._count >= self._max_members:
            raise OverloadedError(
                f"{self._count} consumer group members are live on this node; the limit is "
                f"{self._max_members} (max_group_members)"
            )
