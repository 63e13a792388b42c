"""Configuration of one Raft core, with every limit the core enforces and what happens there.

Rules this module keeps: every field has a unit in its name or is a count; ``Config`` is
validated when built, so the core never runs with an impossible setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftlog.raft.types import ConfState, NodeId, PlantedBug


@dataclass(frozen=True, slots=True)
class Config:
    node_id: NodeId
    election_ticks: int = 10
    """A follower that hears no leader for a random time in [election_ticks, 2*election_ticks)
    starts an election; a leader with check-quorum steps down after election_ticks without
    hearing from a majority."""
    heartbeat_ticks: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    max_inflight_appends: int = 256
    """At the limit, the leader stops sending APPENDs to that follower until acks arrive."""
    max_append_bytes: int = 1 << 20
    """Entry data per APPEND message; a single larger entry is still sent alone."""
    max_uncommitted_bytes: int = 64 << 20
    """At the limit, ``propose`` raises ProposalDroppedError until entries commit."""
    max_entry_bytes: int = 16 << 20
    """A larger proposal raises ProposalDroppedError."""
    max_committed_bytes_per_ready: int = 64 << 20
    """Committed entries handed out in one Ready (at least one entry is always handed out)."""
    preferred_leader: NodeId | None = None
    """When set, a leader that is not the preferred one transfers leadership to it once the
    preferred node has caught up."""
    announce_commit_on_tick: bool = False
    """When True, the leader tells followers a new commit index with its next APPEND (usually
    the next write's) or at its next tick, instead of sending every follower an APPEND of its
    own at once: a lone write then costs one APPEND and one acknowledgement per follower, not
    two, and followers apply it after acknowledging the next write instead of in its way.
    Followers learn commits up to one tick later when no write follows."""
    applied_index: int = 0
    """The last index the application had applied before a restart."""
    applied_conf_state: ConfState | None = None
    """The membership as of ``applied_index``, when the application kept it with that index
    (a checkpoint of its applied state): the restart then takes it, instead of reading every
    configuration entry between the snapshot point and ``applied_index`` back from the log."""
    planted_bugs: frozenset[PlantedBug] = frozenset()
    """Test-only: classic bugs to commit on purpose (see PlantedBug). Empty in production."""

    def __post_init__(self) -> None:
        if not self.node_id:
            raise ValueError("node_id must be non-empty")
        if self.heartbeat_ticks < 1:
            raise ValueError("heartbeat_ticks must be >= 1")
        if self.election_ticks <= self.heartbeat_ticks:
            raise ValueError("election_ticks must be greater than heartbeat_ticks")
        for name in (
            "max_inflight_appends",
            "max_append_bytes",
            "max_uncommitted_bytes",
            "max_entry_bytes",
            "max_committed_bytes_per_ready",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
