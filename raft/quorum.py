"""Majority arithmetic: the commit index a set of voters supports, and the result of a vote.

Rules this module keeps: only voters count (learners never reach these functions); ids are
visited in sorted order; an empty voter set supports nothing and wins nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

from raftlog.raft.types import NodeId


class VoteResult(enum.IntEnum):
    PENDING = 0
    WON = 1
    LOST = 2


def majority_size(voter_count: int) -> int:
    return voter_count // 2 + 1


def committed_index(voters: Sequence[NodeId], match_indexes: Mapping[NodeId, int]) -> int:
    """The highest index stored on a majority of ``voters`` (a missing voter counts as 0)."""
    if not voters:
        return 0
    matched = sorted((match_indexes.get(voter, 0) for voter in voters), reverse=True)
    return matched[majority_size(len(voters)) - 1]


def vote_result(voters: Sequence[NodeId], votes: Mapping[NodeId, bool]) -> VoteResult:
    """WON once a majority granted, LOST once a majority can no longer be reached."""
    if not voters:
        return VoteResult.LOST
    granted = sum(1 for voter in voters if votes.get(voter) is True)
    missing = sum(1 for voter in voters if voter not in votes)
    needed = majority_size(len(voters))
    if granted >= needed:
        return VoteResult.WON
    if granted + missing >= needed:
        return VoteResult.PENDING
    return VoteResult.LOST
