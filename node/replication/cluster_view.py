"""The cluster as one Raft member sees it (``ClusterView``, node/write_path.py), built from the
core's status: role, leader, term, indexes, and each member's replication progress.

Rules this module keeps: a pure function of what it is given (the core's status, the
member's settings, when each peer was last heard from); roles of members other than this one
and the leader are known only to a leader ("unknown" on a follower); a member counts as
recently active when it was heard from within an election timeout (the core's own flag is
reset at every check-quorum round, so it reads False for a moment even for a healthy peer).
"""

from __future__ import annotations

from collections.abc import Mapping

from raftlog.node.write_path import ClusterView, MemberView
from raftlog.raft.status import Status
from raftlog.raft.types import Role

ROLE_NAMES = {
    Role.FOLLOWER: "follower",
    Role.PRE_CANDIDATE: "pre-candidate",
    Role.CANDIDATE: "candidate",
    Role.LEADER: "leader",
}


def build_cluster_view(
    status: Status,
    *,
    node_id: str,
    cluster_id: str,
    peer_addresses: Mapping[str, str],
    applied_index: int,
    active_peers: frozenset[str],
) -> ClusterView:
    """``active_peers``: the members heard from within an election timeout."""
    conf = status.conf_state
    members: list[MemberView] = []
    last_index = status.last_index
    for member_id in [*conf.voters, *conf.learners]:
        progress = status.progress.get(member_id)
        if member_id == node_id:
            role = ROLE_NAMES[status.role]
        elif member_id == status.leader:
            role = "leader"
        elif member_id in conf.learners:
            role = "learner"
        else:
            role = "follower" if status.role is Role.LEADER else "unknown"
        members.append(
            MemberView(
                node_id=member_id,
                address=peer_addresses.get(member_id, ""),
                role=role,
                voter=member_id in conf.voters,
                has_progress=progress is not None,
                match_index=progress.match_index if progress else 0,
                lag_entries=max(0, last_index - progress.match_index) if progress else 0,
                replication_state=progress.state.name.lower() if progress else "",
                inflight_appends=progress.inflight if progress else 0,
                recent_active=(member_id == node_id or member_id in active_peers)
                if progress
                else False,
            )
        )
    leader = status.leader
    return ClusterView(
        cluster_id=cluster_id,
        node_id=node_id,
        role=ROLE_NAMES[status.role],
        leader_id=leader,
        leader_address=peer_addresses.get(leader) if leader else None,
        term=status.term,
        commit_index=status.commit_index,
        applied_index=applied_index,
        last_index=last_index,
        members=members,
        transferring_to=status.lead_transferee,
    )
