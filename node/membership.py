"""The seam between the Admin service and membership changes: what `raftlog member
list|add|remove|promote` asks of a node (the Raft replica implements it in
node/replication/membership_changes.py; a master-slave node has none).

Rules every implementation keeps: one change at a time; a refused change changed nothing
(MembershipRefusedError, UnknownMemberError, InvalidRequestError, NotLeaderError); a change
returns once it is applied on the leader, or raises UnknownOutcomeError when that could not be
learned in time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class MemberEntry:
    """One member: its id, the address the others dial, and whether it votes."""

    node_id: str
    address: str
    voter: bool


@dataclass(frozen=True, slots=True)
class MembershipView:
    """The membership as the answering node applied it (voters then learners, by id)."""

    cluster_id: str
    members: list[MemberEntry]
    leader_id: str | None
    leader_address: str | None


class Membership(Protocol):
    def members(self) -> MembershipView:
        """The membership this node applied (never blocks on the network)."""
        ...

    def add_learner(
        self, node_id: str, address: str, cluster_id: str, *, timeout_s: float
    ) -> MembershipView:
        """Add ``node_id`` at ``address`` as a learner (``cluster_id`` "" = not checked)."""
        ...

    def promote(self, node_id: str, *, timeout_s: float) -> MembershipView:
        """Make the learner ``node_id`` a voter, once it holds every committed entry."""
        ...

    def remove(self, node_id: str, *, timeout_s: float) -> MembershipView:
        """Remove ``node_id``; the leader itself hands leadership over first (then raises
        NotLeaderError naming the new leader, who removes it when asked again)."""
        ...
