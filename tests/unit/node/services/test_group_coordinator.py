"""Consumer.Heartbeat, LockQueues and UnlockQueues on the leader's side
(node/services/group_coordinator.py), over a real store, a scripted write path (who leads,
in which term) and an explicit clock: leader only, a new term empties the tables and waits a
lease before granting, a grant follows a read-index round, and bad input is refused with the
status a client sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import grpc
import pytest

from raftlog.node.errors import NotLeaderError
from raftlog.node.services.group_coordinator import GroupCoordinator
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.services.status_codes import status_for
from raftlog.node.write_path import ClusterView, WritePath
from raftlog.proto import client_pb2
from raftlog.store.message_store import MessageStore
from tests.unit.node.services.conftest import QUEUE_COUNT, TOPIC

LEASE_MS = 3_000
LIMITS = ServiceLimits(consumer_lock_lease_ms=LEASE_MS)


@dataclass
class ScriptedLeadership:
    """The two WritePath calls the coordinator makes: who leads (``cluster_view``) and the
    read-index round (``fetch_offsets`` of no queue), counted."""

    role: str = "leader"
    term: int = 1
    leader_id: str | None = "n1"
    read_index_rounds: int = 0
    on_read_index: list[object] = field(default_factory=list)

    def cluster_view(self) -> ClusterView:
        return ClusterView(
            cluster_id="c",
            node_id="n1",
            role=self.role,
            leader_id=self.leader_id,
            leader_address="127.0.0.1:7702" if self.leader_id == "n2" else "127.0.0.1:7701",
            term=self.term,
            commit_index=0,
            applied_index=0,
            last_index=0,
            members=[],
            transferring_to=None,
        )

    def fetch_offsets(self, group: str, queues: list[object], *, timeout_s: float) -> list[None]:
        assert queues == []
        self.read_index_rounds += 1
        for action in self.on_read_index:
            action()  # type: ignore[operator]
        return []


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def leadership() -> ScriptedLeadership:
    return ScriptedLeadership()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def coordinator(
    store: MessageStore, leadership: ScriptedLeadership, clock: Clock
) -> GroupCoordinator:
    return GroupCoordinator(store, cast(WritePath, leadership), LIMITS, clock)


def heartbeat(
    coordinator: GroupCoordinator, client_id: str, **fields: object
) -> client_pb2.ConsumerHeartbeatResponse:
    fields.setdefault("topics", [TOPIC])
    fields.setdefault("heartbeat_interval_ms", 1000)
    request = client_pb2.ConsumerHeartbeatRequest(group="g", client_id=client_id, **fields)  # type: ignore[arg-type]
    return coordinator.heartbeat(request)


def lock(
    coordinator: GroupCoordinator, client_id: str, queue_ids: list[int], topic: str = TOPIC
) -> client_pb2.LockQueuesResponse:
    request = client_pb2.LockQueuesRequest(
        group="g", client_id=client_id, topic=topic, queue_ids=queue_ids
    )
    return coordinator.lock(request, timeout_s=1.0)


def code_of(error: BaseException) -> grpc.StatusCode:
    return cast(grpc.StatusCode, status_for(error).code)


def test_heartbeats_list_the_live_members_and_warm_up_after_a_takeover(
    coordinator: GroupCoordinator, clock: Clock
) -> None:
    first = heartbeat(coordinator, "b")
    assert first.warming_up and first.term == 1
    assert [(m.topic, list(m.client_ids)) for m in first.members] == [(TOPIC, ["b"])]
    clock.now_s += 1.0
    assert list(heartbeat(coordinator, "a").members[0].client_ids) == ["a", "b"]
    # Two of the asker's intervals after the takeover, the list is complete.
    clock.now_s += 1.0
    assert not heartbeat(coordinator, "a").warming_up
    # b missed three heartbeats: gone. a leaves: gone at once.
    clock.now_s += 1.5
    assert list(heartbeat(coordinator, "a").members[0].client_ids) == ["a"]
    assert list(heartbeat(coordinator, "a", leaving=True).members[0].client_ids) == []


def test_a_follower_redirects_and_forgets_its_tables(
    coordinator: GroupCoordinator, leadership: ScriptedLeadership, clock: Clock
) -> None:
    heartbeat(coordinator, "a")
    leadership.role, leadership.leader_id, leadership.term = "follower", "n2", 2
    with pytest.raises(NotLeaderError) as raised:
        heartbeat(coordinator, "a")
    assert raised.value.leader_address == "127.0.0.1:7702"
    assert code_of(raised.value) == grpc.StatusCode.FAILED_PRECONDITION
    leadership.leader_id = None
    with pytest.raises(NotLeaderError) as raised:
        lock(coordinator, "a", [0])
    assert code_of(raised.value) == grpc.StatusCode.UNAVAILABLE
    # Leading again (a later term): it starts empty and warms up again.
    leadership.role, leadership.leader_id, leadership.term = "leader", "n1", 3
    clock.now_s += 100.0
    answer = heartbeat(coordinator, "b")
    assert answer.warming_up and list(answer.members[0].client_ids) == ["b"]


def test_a_new_leader_waits_one_lease_then_grants_after_a_read_index_round(
    coordinator: GroupCoordinator, leadership: ScriptedLeadership, clock: Clock
) -> None:
    waiting = lock(coordinator, "a", [0, 1])
    assert list(waiting.locked_queue_ids) == []
    assert waiting.retry_after_ms == LEASE_MS and waiting.lease_ms == LEASE_MS
    assert leadership.read_index_rounds == 0  # nothing to confirm while waiting
    clock.now_s += LEASE_MS / 1000
    granted = lock(coordinator, "a", [1, 0, 1])
    assert list(granted.locked_queue_ids) == [0, 1] and granted.retry_after_ms == 0
    assert leadership.read_index_rounds == 1
    assert list(lock(coordinator, "b", [1, 2]).locked_queue_ids) == [2]
    unlocked = coordinator.unlock(
        client_pb2.UnlockQueuesRequest(group="g", client_id="a", topic=TOPIC, queue_ids=[1, 2])
    )
    assert list(unlocked.unlocked_queue_ids) == [1]
    assert list(lock(coordinator, "b", [1]).locked_queue_ids) == [1]
    # Leaving releases a member's locks at once.
    heartbeat(coordinator, "a", leaving=True)
    assert list(lock(coordinator, "b", [0]).locked_queue_ids) == [0]


def test_a_term_change_during_the_read_index_round_grants_nothing(
    coordinator: GroupCoordinator, leadership: ScriptedLeadership, clock: Clock
) -> None:
    lock(coordinator, "a", [0])
    clock.now_s += LEASE_MS / 1000

    def lost_and_won_again() -> None:
        leadership.term += 2

    leadership.on_read_index.append(lost_and_won_again)
    answer = lock(coordinator, "a", [0])
    assert list(answer.locked_queue_ids) == [] and answer.retry_after_ms > 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"group": ""}, "group is empty"),
        ({"client_id": ""}, "client_id"),
        ({"client_id": "a b"}, "client_id"),
        ({"topics": []}, "topics holds 0"),
        ({"topics": ["t", "t"]}, "twice"),
        ({"topics": ["bad topic"]}, "bad topic"),
        ({"heartbeat_interval_ms": 50}, "heartbeat_interval_ms is 50"),
        ({"heartbeat_interval_ms": 400_000}, "heartbeat_interval_ms"),
    ],
)
def test_bad_heartbeats_are_invalid_argument(
    coordinator: GroupCoordinator, fields: dict[str, object], message: str
) -> None:
    values: dict[str, object] = {
        "group": "g",
        "client_id": "a",
        "topics": [TOPIC],
        "heartbeat_interval_ms": 0,
    }
    values.update(fields)
    with pytest.raises(Exception, match=message) as raised:
        coordinator.heartbeat(client_pb2.ConsumerHeartbeatRequest(**values))  # type: ignore[arg-type]
    assert code_of(raised.value) == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("queue_ids", "topic", "code"),
    [
        ([], TOPIC, grpc.StatusCode.INVALID_ARGUMENT),
        ([-1], TOPIC, grpc.StatusCode.INVALID_ARGUMENT),
        ([QUEUE_COUNT], TOPIC, grpc.StatusCode.NOT_FOUND),
        ([0], "missing", grpc.StatusCode.NOT_FOUND),
    ],
)
def test_bad_locks_are_refused(
    coordinator: GroupCoordinator,
    clock: Clock,
    queue_ids: list[int],
    topic: str,
    code: grpc.StatusCode,
) -> None:
    lock(coordinator, "a", [0])
    clock.now_s += LEASE_MS / 1000
    with pytest.raises(Exception) as raised:
        lock(coordinator, "a", queue_ids, topic)
    assert code_of(raised.value) == code
