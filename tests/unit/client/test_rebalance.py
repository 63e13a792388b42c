"""The member's side of clustering and orderly consumption, with a scripted leader and an
explicit clock: the allocation follows the heartbeat's member list (kept while a new leader
warms up or the leader is away), a server without Heartbeat makes every member read every
queue, and queue locks are trusted only until their lease (less the margin) counted from
when the request was sent (client/rebalance.py, client/queue_locks.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import grpc
import pytest

from raftlog.client.connection import Connection
from raftlog.client.errors import InternalError, UnavailableError
from raftlog.client.queue_locks import LOCK_RETRY_S, QueueLocks
from raftlog.client.rebalance import Rebalance, check_member_id, new_member_id
from raftlog.proto import client_pb2

QUEUES = {q: 0 for q in range(6)}


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


class ScriptedLeader:
    """Answers Consumer calls with ``answers[method](request)``; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.answers: dict[str, Callable[[Any], Any]] = {}

    def call(self, service: str, method: str, request: Any, **_options: Any) -> Any:
        self.calls.append((method, request))
        return self.answers[method](request)

    def members(self, *member_ids: str, warming_up: bool = False) -> None:
        def answer(request: Any) -> Any:
            return client_pb2.ConsumerHeartbeatResponse(
                members=[client_pb2.TopicMembers(topic=request.topics[0], client_ids=member_ids)],
                warming_up=warming_up,
            )

        self.answers["Heartbeat"] = answer

    def fail(self, method: str, error: Exception) -> None:
        def answer(_request: Any) -> Any:
            raise error

        self.answers[method] = answer


def rebalance(
    leader: ScriptedLeader, clock: Clock, member_id: str = "b", **options: Any
) -> Rebalance:
    return Rebalance(
        cast(Connection, leader),
        "g",
        "t",
        member_id,
        lambda: dict(QUEUES),
        heartbeat_interval_s=1.0,
        clock=clock,
        **options,
    )


def test_the_allocation_follows_the_members_at_each_heartbeat() -> None:
    leader, clock = ScriptedLeader(), Clock()
    leader.members("a", "b", "c")
    plan = rebalance(leader, clock)
    # Not alone: new queues start two intervals later, once their owner gave them up.
    assert plan.target(set()) is None
    clock.now_s += 2.0
    assert plan.target(set()) == {2, 3}
    assert plan.target({2, 3}) is None  # no heartbeat due: unchanged
    leader.members("b", "c")
    clock.now_s += 0.5
    assert plan.target({2, 3}) is None
    clock.now_s += 0.5
    assert plan.target({2, 3}) == {2}  # 3 goes at once; 0 and 1 come after the grace
    clock.now_s += 2.0
    assert plan.target({2}) == {0, 1, 2}
    heartbeats = [r for m, r in leader.calls if m == "Heartbeat"]
    assert heartbeats[0].heartbeat_interval_ms == 1000 and list(heartbeats[0].topics) == ["t"]


def test_a_warming_leader_and_a_failed_heartbeat_keep_the_queues_read() -> None:
    leader, clock = ScriptedLeader(), Clock()
    leader.members("a", "b")
    plan = rebalance(leader, clock)
    plan.target(set())
    clock.now_s += 2.0
    assert plan.target(set()) == {3, 4, 5}
    leader.members("b", warming_up=True)  # a has not reached the new leader yet
    clock.now_s += 1.0
    assert plan.target({3, 4, 5}) is None
    leader.fail("Heartbeat", UnavailableError("no leader"))
    clock.now_s += 1.0
    assert plan.target({3, 4, 5}) is None
    leader.members("b")  # complete now: a is gone, and b, alone, takes its queues at once
    clock.now_s += 1.0
    assert plan.target({3, 4, 5}) == set(QUEUES)


def test_a_member_missing_from_the_answer_counts_itself() -> None:
    leader, clock = ScriptedLeader(), Clock()
    leader.members("a")
    plan = rebalance(leader, clock)
    plan.target(set())
    clock.now_s += 2.0
    assert plan.target(set()) == {3, 4, 5}


def test_the_first_heartbeat_failing_raises_and_later_ones_do_not() -> None:
    leader, clock = ScriptedLeader(), Clock()
    leader.fail("Heartbeat", UnavailableError("no leader"))
    plan = rebalance(leader, clock)
    with pytest.raises(UnavailableError):
        plan.target(set())


def test_a_server_without_heartbeat_gives_every_member_every_queue() -> None:
    leader, clock = ScriptedLeader(), Clock()
    leader.fail("Heartbeat", InternalError("UNIMPLEMENTED", code=grpc.StatusCode.UNIMPLEMENTED))
    plan = rebalance(leader, clock)
    assert plan.target(set()) == set(QUEUES)
    clock.now_s += 1.0
    assert plan.target(set(QUEUES)) is None
    assert [m for m, _ in leader.calls] == ["Heartbeat"]  # not asked again
    plan.leave()  # never joined: nothing to say
    assert len(leader.calls) == 1
    orderly = rebalance(leader, clock, orderly=True)
    with pytest.raises(InternalError, match="LockQueues"):
        orderly.target(set())


def test_leaving_tells_the_leader() -> None:
    leader, clock = ScriptedLeader(), Clock()
    leader.members("b")
    plan = rebalance(leader, clock)
    plan.target(set())
    plan.leave()
    method, request = leader.calls[-1]
    assert method == "Heartbeat" and request.leaving


def test_member_ids() -> None:
    assert new_member_id() != new_member_id()
    assert check_member_id(new_member_id())
    with pytest.raises(ValueError, match="client_id"):
        check_member_id("has space")
    with pytest.raises(ValueError, match="allocation 'nope'"):
        rebalance(ScriptedLeader(), Clock(), allocation="nope")


# ---------------------------------------------------------------------- queue locks

LEASE_MS = 10_000


class LockLeader(ScriptedLeader):
    """A leader that grants what nobody else holds (``taken``), or says to wait."""

    def __init__(self) -> None:
        super().__init__()
        self.taken: set[int] = set()
        self.retry_after_ms = 0
        self.answers["LockQueues"] = self._lock
        self.answers["UnlockQueues"] = lambda r: client_pb2.UnlockQueuesResponse(
            unlocked_queue_ids=r.queue_ids
        )

    def _lock(self, request: Any) -> Any:
        if self.retry_after_ms:
            return client_pb2.LockQueuesResponse(
                lease_ms=LEASE_MS, retry_after_ms=self.retry_after_ms
            )
        granted = [q for q in request.queue_ids if q not in self.taken]
        return client_pb2.LockQueuesResponse(locked_queue_ids=granted, lease_ms=LEASE_MS)


def lock_calls(leader: ScriptedLeader) -> list[list[int]]:
    return [list(r.queue_ids) for m, r in leader.calls if m == "LockQueues"]


def test_a_lock_is_trusted_until_its_lease_less_the_margin_from_sending() -> None:
    leader, clock = LockLeader(), Clock()
    locks = QueueLocks(
        lambda method, request: leader.call("Consumer", method, request), "g", "t", "a", clock
    )
    assert locks.usable() == set()
    locks.refresh([0, 1])
    assert locks.usable() == {0, 1} and locks.lease_s == 10.0
    # Trusted for 9 s (10 % margin); handed out only with 1 s (10 %) to spare.
    clock.now_s += 7.9
    assert locks.usable() == {0, 1}
    clock.now_s += 0.2
    assert locks.usable() == set()


def test_locks_are_renewed_every_third_of_the_lease() -> None:
    leader, clock = LockLeader(), Clock()
    locks = QueueLocks(lambda m, r: leader.call("Consumer", m, r), "g", "t", "a", clock)
    locks.refresh([0])
    clock.now_s += 3.0
    locks.refresh([0])
    assert lock_calls(leader) == [[0]]
    clock.now_s += 0.4
    locks.refresh([0])
    assert lock_calls(leader) == [[0], [0]]
    clock.now_s += 8.0  # 8.4 s after the first grant, 5 s after the renewal
    assert locks.usable() == {0}


def test_a_queue_held_elsewhere_is_asked_for_again_and_failures_end_locks() -> None:
    leader, clock = LockLeader(), Clock()
    leader.taken = {1}
    locks = QueueLocks(lambda m, r: leader.call("Consumer", m, r), "g", "t", "a", clock)
    locks.refresh([0, 1])
    assert locks.usable() == {0}
    locks.refresh([0, 1])
    assert len(lock_calls(leader)) == 1  # asked again only after LOCK_RETRY_S
    leader.taken = set()
    clock.now_s += LOCK_RETRY_S
    locks.refresh([0, 1])
    assert locks.usable() == {0, 1}
    # The leader is away: nothing is renewed, and the locks end on their own.
    leader.fail("LockQueues", UnavailableError("no leader"))
    clock.now_s += 4.0
    locks.refresh([0, 1])
    assert locks.usable() == {0, 1}
    clock.now_s += 4.5
    locks.refresh([0, 1])
    assert locks.usable() == set()


def test_a_new_leader_says_when_to_ask_again() -> None:
    leader, clock = LockLeader(), Clock()
    leader.retry_after_ms = 2500
    locks = QueueLocks(lambda m, r: leader.call("Consumer", m, r), "g", "t", "a", clock)
    locks.refresh([0])
    clock.now_s += 2.0
    locks.refresh([0])
    assert len(lock_calls(leader)) == 1
    leader.retry_after_ms = 0
    clock.now_s += 0.5
    locks.refresh([0])
    assert locks.usable() == {0}


def test_release_unlocks_only_what_is_held() -> None:
    leader, clock = LockLeader(), Clock()
    locks = QueueLocks(lambda m, r: leader.call("Consumer", m, r), "g", "t", "a", clock)
    locks.refresh([0, 1])
    locks.release([1, 5])
    assert locks.usable() == {0}
    unlocks = [list(r.queue_ids) for m, r in leader.calls if m == "UnlockQueues"]
    assert unlocks == [[1]]
    locks.release([7])  # nothing held: no call
    assert len([m for m, _ in leader.calls if m == "UnlockQueues"]) == 1


def test_an_orderly_plan_reads_only_the_locked_allocated_queues() -> None:
    leader, clock = LockLeader(), Clock()
    leader.members("a", "b")
    leader.taken = {4}
    plan = rebalance(leader, clock, orderly=True)
    assert plan.target(set()) == {3, 5}
    plan.released([3])
    assert [list(r.queue_ids) for m, r in leader.calls if m == "UnlockQueues"] == [[3]]
