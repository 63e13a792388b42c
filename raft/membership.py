"""Membership arithmetic for single-server changes (Raft thesis §4.1): what a ConfChange does
to a ConfState, and which changes a leader refuses to propose.

Rules this module keeps: pure functions on immutable values; the resulting tuples are sorted
and disjoint; applying a change is deterministic and total (a change that makes no sense when
applied - e.g. removing a stranger - leaves the membership as it is, on every replica alike).
"""

from __future__ import annotations

from raftlog.raft.types import ConfChange, ConfChangeType, ConfState


def apply_change(conf_state: ConfState, change: ConfChange) -> ConfState:
    voters = set(conf_state.voters)
    learners = set(conf_state.learners)
    node_id = change.node_id
    if change.type == ConfChangeType.ADD_VOTER:
        learners.discard(node_id)  # promotion of a learner, or a new voter
        voters.add(node_id)
    elif change.type == ConfChangeType.ADD_LEARNER:
        if node_id not in voters:  # demotion is not a single-server change we offer
            learners.add(node_id)
    else:
        voters.discard(node_id)
        learners.discard(node_id)
    return ConfState(voters=tuple(sorted(voters)), learners=tuple(sorted(learners)))


def refusal(conf_state: ConfState, change: ConfChange) -> str | None:
    """Why a leader must not propose ``change`` on ``conf_state``; None if it may."""
    node_id = change.node_id
    is_member = node_id in conf_state.voters or node_id in conf_state.learners
    if change.type == ConfChangeType.ADD_VOTER and node_id in conf_state.voters:
        return f"{node_id} is already a voter"
    if change.type == ConfChangeType.ADD_LEARNER and is_member:
        return f"{node_id} is already a member"
    if change.type == ConfChangeType.REMOVE_NODE:
        if not is_member:
            return f"{node_id} is not a member"
        if conf_state.voters == (node_id,):
            return "cannot remove the last voter"
    return None
