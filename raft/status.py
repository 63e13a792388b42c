"""Status: a read-only snapshot of one core's state for observers (tests, metrics, the node's
admin API, the simulation's checkers). Building it copies; nothing in it aliases the core.

Rules this module keeps: ``progress`` is filled only on a leader, keyed by every member
(voters and learners, the leader included), in sorted id order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftlog.raft.progress import ProgressState
from raftlog.raft.types import ConfState, NodeId, Role


@dataclass(frozen=True, slots=True)
class ProgressStatus:
    match_index: int
    next_index: int
    state: ProgressState
    inflight: int
    """APPENDs sent but not yet acknowledged."""
    is_learner: bool = False
    recent_active: bool = False


@dataclass(frozen=True, slots=True)
class Status:
    node_id: NodeId
    role: Role
    term: int
    leader: NodeId | None
    commit_index: int
    applied_index: int
    progress: dict[NodeId, ProgressStatus] = field(default_factory=dict)
    vote: NodeId | None = None
    last_index: int = 0
    conf_state: ConfState = field(default_factory=lambda: ConfState(voters=()))
    """Membership as of ``applied_index`` (what ``MemoryStorage.compact`` wants)."""
    lead_transferee: NodeId | None = None
    """The leadership-transfer target while a transfer is in progress."""
