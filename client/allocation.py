"""Queue allocation strategies for clustering consumption: which of a topic's queues one
member of a consumer group reads, given the group's live members (RocketMQ's
AllocateMessageQueueStrategy; docs/messaging.md "Clustering and rebalance").

Every member runs the same strategy over the same lists (the leader's heartbeat answer and
the topic's queues), so once they have seen the same members each queue has exactly one
owner, with no coordination beyond the heartbeat.

Rules this module keeps:
- Pure functions of (topic, member id, members, queue ids): the inputs are sorted and
  de-duplicated here, so the order a caller passes them in never changes the answer.
- A member that is not in the list gets no queue (it is not part of the group yet).
- Together the members' answers cover every queue exactly once (tests/unit/client check it
  for every strategy and many shapes).
- ``average``: contiguous blocks, the first ``len(queues) % len(members)`` members one queue
  more (RocketMQ's AllocateMessageQueueAveragely). ``average_by_circle``: queue i to member
  i mod n (AllocateMessageQueueAveragelyByCircle). ``consistent_hash``: each queue to the
  first of the members' virtual nodes at or after its hash on a ring
  (AllocateMessageQueueConsistentHash, MD5, ``VIRTUAL_NODES`` per member), so a member
  coming or going moves only about 1/n of the queues; the balance is rougher.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence

# Virtual nodes per member on the consistent-hash ring (RocketMQ's default is 10).
VIRTUAL_NODES = 10

Strategy = Callable[[str, str, Sequence[str], Sequence[int]], list[int]]


def average(
    topic: str, member_id: str, members: Sequence[str], queue_ids: Sequence[int]
) -> list[int]:
    """A contiguous block of the sorted queues; blocks differ in size by at most one."""
    ordered_members, queues = _sorted_inputs(members, queue_ids)
    if member_id not in ordered_members or not queues:
        return []
    index = ordered_members.index(member_id)
    member_count = len(ordered_members)
    base, extra = divmod(len(queues), member_count)
    start = index * base + min(index, extra)
    size = base + (1 if index < extra else 0)
    return queues[start : start + size]


def average_by_circle(
    topic: str, member_id: str, members: Sequence[str], queue_ids: Sequence[int]
) -> list[int]:
    """Every n-th of the sorted queues, starting at the member's place among the members."""
    ordered_members, queues = _sorted_inputs(members, queue_ids)
    if member_id not in ordered_members:
        return []
    index = ordered_members.index(member_id)
    return queues[index :: len(ordered_members)]


def consistent_hash(
    topic: str, member_id: str, members: Sequence[str], queue_ids: Sequence[int]
) -> list[int]:
    """The queues whose hash falls on this member's arcs of the ring."""
    ordered_members, queues = _sorted_inputs(members, queue_ids)
    if member_id not in ordered_members:
        return []
    ring = sorted(
        (_hash(f"{member}-{replica}"), member)
        for member in ordered_members
        for replica in range(VIRTUAL_NODES)
    )
    points = [point for point, _ in ring]
    mine: list[int] = []
    for queue_id in queues:
        at = bisect.bisect_left(points, _hash(f"{topic}@{queue_id}")) % len(ring)
        if ring[at][1] == member_id:
            mine.append(queue_id)
    return mine


STRATEGIES: dict[str, Strategy] = {
    "average": average,
    "average_by_circle": average_by_circle,
    "consistent_hash": consistent_hash,
}


def strategy(name: str) -> Strategy:
    """The strategy called ``name``; ValueError naming the choices otherwise."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"allocation {name!r} is not one of {', '.join(sorted(STRATEGIES))}"
        ) from None


def _sorted_inputs(members: Sequence[str], queue_ids: Sequence[int]) -> tuple[list[str], list[int]]:
    return sorted(set(members)), sorted(set(queue_ids))


def _hash(key: str) -> int:
    """The first four bytes of the key's MD5, as RocketMQ's MD5Hash takes them."""
    return int.from_bytes(hashlib.md5(key.encode(), usedforsecurity=False).digest()[:4], "big")
