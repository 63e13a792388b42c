"""The options of one simulation run: cluster shape, core settings and fault rates.

Rules this module keeps:
- Options are drawn from the run's own seed (swarm testing: each seed gets its own mix of
  faults, so rare combinations show up across a soak), by a named profile. The seed and the
  profile (plus the planted bugs, if any) rebuild them exactly; ``describe()`` prints them.
- Rates are probabilities per tick (cluster faults, proposals) or per message (network).
- Profiles other than "default" aim the faults at one planted bug (see test_planted_bugs.py);
  they are still legal schedules, so a correct core passes them too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from raftlog.node.replication.planted_bugs import NodePlantedBug
from raftlog.raft.types import PlantedBug

AnyPlantedBug = PlantedBug | NodePlantedBug
"""A bug planted in the core (PlantedBug) or in the node's handler or storage."""

UNLIMITED_APPEND_BYTES = 1 << 20
FEW_ENTRIES_BYTES = 512


@dataclass(frozen=True, slots=True)
class SimOptions:
    profile: str
    node_count: int
    safety_ticks: int
    heal_ticks_max: int
    election_ticks: int
    heartbeat_ticks: int
    pre_vote: bool
    check_quorum: bool
    max_append_bytes: int
    max_inflight_appends: int
    drop_probability: float
    duplicate_probability: float
    delay_probability: float
    delay_ticks_max: int
    partition_probability: float
    partition_heal_probability: float
    one_way_partition_share: float
    crash_probability: float
    crash_leader_share: float
    """Of the crashes, the share that hits the leader when there is one."""
    restart_probability: float
    torn_write_probability: float
    background_sync_probability: float
    """Chance per tick and node that the OS flushes unsynced writes on its own."""
    crash_after_vote_probability: float
    """Chance a node that just granted a vote crashes right after sending the grant."""
    leader_crash_before_send_probability: float
    """Chance a leader crashes between persisting a Ready that appends entries or advances its
    commit index and sending that Ready's messages."""
    proposal_probability: float
    transfer_probability: float
    compaction_probability: float
    membership_change_probability: float
    """Chance per tick that the leader removes a voter, or adds back the one removed."""
    announce_commit_on_tick: bool = False
    planted_bugs: frozenset[AnyPlantedBug] = frozenset()

    def describe(self) -> str:
        parts = []
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, frozenset):
                value = ",".join(sorted(bug.value for bug in value)) or "-"
            parts.append(f"{spec.name}={value}")
        return " ".join(parts)


def _default(rng: random.Random) -> SimOptions:
    # One entry, a few, or no bound per APPEND: an entry is a stamped message record of
    # about 120 bytes in its envelope.
    max_append_bytes = rng.choice((1, FEW_ENTRIES_BYTES, UNLIMITED_APPEND_BYTES))
    options = SimOptions(
        profile="default",
        node_count=rng.choice((3, 3, 5)),
        safety_ticks=250,
        heal_ticks_max=400,
        election_ticks=10,
        heartbeat_ticks=rng.choice((1, 2)),
        pre_vote=rng.random() < 0.8,
        check_quorum=rng.random() < 0.8,
        max_append_bytes=max_append_bytes,
        # One entry per APPEND and one APPEND in flight replicates slower than clients
        # propose; the backlog would outlast any heal bound, so that pair is never drawn.
        max_inflight_appends=rng.choice((4, 256) if max_append_bytes == 1 else (1, 4, 256)),
        drop_probability=rng.choice((0.0, 0.02, 0.1)),
        duplicate_probability=rng.choice((0.0, 0.02, 0.1)),
        delay_probability=rng.choice((0.0, 0.1, 0.3)),
        delay_ticks_max=rng.choice((2, 5, 15)),
        partition_probability=rng.choice((0.0, 0.01, 0.03)),
        partition_heal_probability=rng.choice((0.03, 0.1)),
        one_way_partition_share=0.3,
        crash_probability=rng.choice((0.0, 0.005, 0.02)),
        crash_leader_share=rng.choice((0.0, 0.5)),
        restart_probability=rng.choice((0.05, 0.2)),
        torn_write_probability=0.5,
        background_sync_probability=rng.choice((0.0, 0.1)),
        crash_after_vote_probability=rng.choice((0.0, 0.0, 0.05)),
        leader_crash_before_send_probability=rng.choice((0.0, 0.0, 0.02)),
        proposal_probability=rng.choice((0.2, 0.5, 1.0)),
        transfer_probability=rng.choice((0.0, 0.005)),
        compaction_probability=rng.choice((0.0, 0.02, 0.05)),
        membership_change_probability=rng.choice((0.0, 0.0, 0.01)),
    )
    # Drawn last, so the draws above stay what they were before this option existed.
    return replace(options, announce_commit_on_tick=rng.random() < 0.5)


def _figure8(rng: random.Random) -> SimOptions:
    """Raft paper Figure 8: leaders that die right after appending (their entry stays on them
    alone) or right after advancing commit (before anyone hears of it), and come back while
    others lead; one entry per APPEND, so an old-term entry can reach a majority under a
    later leader before that leader's own no-op does. Short election timeouts and long runs:
    it takes several rounds of leaders."""
    return replace(
        _default(rng),
        profile="figure8",
        membership_change_probability=0.0,
        node_count=3,
        safety_ticks=600,
        election_ticks=5,
        heartbeat_ticks=1,
        max_append_bytes=1,
        max_inflight_appends=4,
        drop_probability=rng.choice((0.05, 0.15)),
        partition_probability=0.05,
        partition_heal_probability=0.1,
        crash_probability=0.02,
        crash_leader_share=0.8,
        restart_probability=0.15,
        leader_crash_before_send_probability=0.35,
        proposal_probability=0.5,
    )


def _vote_crash(rng: random.Random) -> SimOptions:
    """Many elections (leaders killed, short timeouts) that split often (no pre-vote, late
    messages), with voters that crash right after granting and come back at once, so a
    forgotten vote can be granted twice in one term."""
    return replace(
        _default(rng),
        profile="vote-crash",
        membership_change_probability=0.0,
        node_count=3,
        safety_ticks=600,
        election_ticks=5,
        heartbeat_ticks=1,
        pre_vote=False,
        check_quorum=rng.random() < 0.5,
        drop_probability=0.0,
        delay_probability=0.5,
        delay_ticks_max=4,
        crash_probability=0.05,
        crash_leader_share=1.0,
        restart_probability=0.7,
        crash_after_vote_probability=0.5,
    )


def _divergence(rng: random.Random) -> SimOptions:
    """Leaders cut off with uncommitted tails, so followers hold logs that diverge from the
    next leader's: appends must be checked against the entry before them."""
    return replace(
        _default(rng),
        profile="divergence",
        membership_change_probability=0.0,
        node_count=3,
        max_append_bytes=rng.choice((1, FEW_ENTRIES_BYTES)),
        partition_probability=0.05,
        partition_heal_probability=0.1,
        crash_probability=0.02,
        crash_leader_share=0.8,
        restart_probability=0.1,
        leader_crash_before_send_probability=0.25,
        proposal_probability=1.0,
    )


PROFILES: dict[str, Callable[[random.Random], SimOptions]] = {
    "default": _default,
    "figure8": _figure8,
    "vote-crash": _vote_crash,
    "divergence": _divergence,
}


def draw_options(
    rng: random.Random, profile: str, planted_bugs: frozenset[AnyPlantedBug] = frozenset()
) -> SimOptions:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(sorted(PROFILES))}")
    return replace(PROFILES[profile](rng), planted_bugs=planted_bugs)
