"""The leader's registry of live consumer-group members (node/messaging/group_members.py),
driven by an explicit clock: members expire after three missed heartbeats, leave at once,
are answered sorted per topic, and the table is bounded."""

from __future__ import annotations

import pytest

from raftlog.node.errors import OverloadedError
from raftlog.node.messaging.group_members import MISSED_HEARTBEATS, GroupMembers

INTERVAL_S = 1.0


def test_members_are_sorted_per_topic_and_groups_are_apart() -> None:
    members = GroupMembers(100)
    members.heartbeat("g", "c2", ["t"], INTERVAL_S, 0.0)
    members.heartbeat("g", "c1", ["t", "u"], INTERVAL_S, 0.0)
    members.heartbeat("other", "c3", ["t"], INTERVAL_S, 0.0)
    answer = members.heartbeat("g", "c0", ["t"], INTERVAL_S, 0.1)
    assert answer == {"t": ["c0", "c1", "c2"]}
    assert members.members("g", "u", 0.1) == ["c1"]
    assert members.members("other", "t", 0.1) == ["c3"]
    assert len(members) == 5


def test_a_member_expires_after_three_missed_heartbeats() -> None:
    members = GroupMembers(100)
    members.heartbeat("g", "alive", ["t"], INTERVAL_S, 0.0)
    members.heartbeat("g", "dying", ["t"], INTERVAL_S, 0.0)
    # Two missed heartbeats are not enough: a lost one never drops a member.
    members.heartbeat("g", "alive", ["t"], INTERVAL_S, 2.9)
    assert members.members("g", "t", 2.9) == ["alive", "dying"]
    assert members.members("g", "t", MISSED_HEARTBEATS * INTERVAL_S) == ["alive"]
    assert len(members) == 1


def test_the_interval_is_each_members_own() -> None:
    members = GroupMembers(100)
    members.heartbeat("g", "slow", ["t"], 10.0, 0.0)
    members.heartbeat("g", "fast", ["t"], 0.1, 0.0)
    assert members.members("g", "t", 1.0) == ["slow"]


def test_leaving_drops_the_member_at_once() -> None:
    members = GroupMembers(100)
    members.heartbeat("g", "a", ["t", "u"], INTERVAL_S, 0.0)
    members.heartbeat("g", "b", ["t"], INTERVAL_S, 0.0)
    answer = members.heartbeat("g", "a", ["t", "u"], INTERVAL_S, 0.5, leaving=True)
    assert answer == {"t": ["b"], "u": []}
    assert len(members) == 1
    # Leaving twice, or without having joined, is harmless.
    assert members.heartbeat("g", "a", ["t"], INTERVAL_S, 0.6, leaving=True) == {"t": ["b"]}


def test_the_table_is_bounded_and_expired_members_make_room() -> None:
    members = GroupMembers(2)
    members.heartbeat("g", "a", ["t"], INTERVAL_S, 0.0)
    members.heartbeat("g", "b", ["t"], INTERVAL_S, 0.0)
    with pytest.raises(OverloadedError, match="max_group_members"):
        members.heartbeat("h", "c", ["t"], INTERVAL_S, 1.0)
    # A known member is always refreshed.
    members.heartbeat("g", "a", ["t"], INTERVAL_S, 1.0)
    # Once b expired, its entry is reused.
    assert members.heartbeat("h", "c", ["t"], INTERVAL_S, 3.5) == {"t": ["c"]}
    assert len(members) == 2


def test_clear_forgets_everyone() -> None:
    members = GroupMembers(10)
    members.heartbeat("g", "a", ["t"], INTERVAL_S, 0.0)
    members.clear()
    assert members.members("g", "t", 0.0) == [] and len(members) == 0
