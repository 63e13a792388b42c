"""Membership changes (Raft thesis §4.1, single-server), applied when the entry is applied;
learners; removing the leader; membership after a restart."""

from __future__ import annotations

import pytest

from raftlog.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ProposalDroppedError,
    Role,
)
from tests.unit.raft.cluster import Cluster
from tests.unit.raft.helpers import drain_all, make_leader, new_node, restart

ADD_VOTER = ConfChangeType.ADD_VOTER
ADD_LEARNER = ConfChangeType.ADD_LEARNER
REMOVE = ConfChangeType.REMOVE_NODE


def add_member(cluster: Cluster, node_id: str, change_type: ConfChangeType, leader: str = "a"):
    """Start ``node_id`` from the cluster's bootstrap membership and propose its addition."""
    if node_id not in cluster.nodes:
        cluster.add_node(node_id, ConfState(voters=cluster.ids))
    index = cluster.nodes[leader].propose_conf_change(ConfChange(change_type, node_id))
    cluster.pump()
    return index


def test_add_voter_takes_effect_when_applied():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.add_node("d", ConfState(voters=cluster.ids))
    cluster.nodes["a"].propose_conf_change(ConfChange(ADD_VOTER, "d"))
    assert cluster.nodes["a"].conf_state.voters == ("a", "b", "c")  # appended, not applied
    cluster.pump()
    cluster.tick_all(2)
    for node_id in ("a", "b", "c", "d"):
        assert cluster.nodes[node_id].conf_state.voters == ("a", "b", "c", "d")
    assert cluster.data_applied("d") == [b"x"]
    # Four voters: two are no longer a majority.
    cluster.partition(["a", "b"], ["c", "d"])
    cluster.nodes["a"].propose(b"y")
    cluster.pump()
    assert b"y" not in cluster.data_applied("a")


def test_one_conf_change_pending_at_a_time():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.nodes["a"].propose_conf_change(ConfChange(ADD_LEARNER, "d"))
    with pytest.raises(ProposalDroppedError, match="pending"):
        cluster.nodes["a"].propose_conf_change(ConfChange(ADD_LEARNER, "e"))
    cluster.pump()
    cluster.nodes["a"].propose_conf_change(ConfChange(ADD_LEARNER, "e"))  # applied: allowed


def test_conf_change_refused_before_leader_commits_in_its_term():
    node, storage = new_node("a", pre_vote=False)
    make_leader(node, storage)  # its no-op is not committed yet
    with pytest.raises(ProposalDroppedError, match="committed"):
        node.propose_conf_change(ConfChange(ADD_VOTER, "d"))


def test_senseless_conf_changes_are_refused():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    leader = cluster.nodes["a"]
    for change in (
        ConfChange(ADD_VOTER, "b"),
        ConfChange(ADD_LEARNER, "b"),
        ConfChange(REMOVE, "z"),
    ):
        with pytest.raises(ProposalDroppedError):
            leader.propose_conf_change(change)
    single = Cluster(("a",))
    single.elect("a")
    with pytest.raises(ProposalDroppedError, match="last voter"):
        single.nodes["a"].propose_conf_change(ConfChange(REMOVE, "a"))


def test_learner_does_not_vote_or_count():
    cluster = Cluster(("a", "b"), learners=("l",))
    cluster.elect("a")
    cluster.propose("a", b"x")
    assert cluster.data_applied("l") == [b"x"]  # learners replicate
    cluster.isolate("b")
    index = cluster.nodes["a"].propose(b"y")
    cluster.pump()
    assert cluster.nodes["l"].status().last_index >= index  # l stores it...
    assert cluster.nodes["a"].commit_index < index  # ...but does not count toward commit
    # Nor does a learner's answer: a loses its quorum, and cannot win an election with l.
    for _ in range(60):
        cluster.tick("a")
        cluster.tick("l")
        cluster.pump()
    assert cluster.nodes["a"].role != Role.LEADER
    assert cluster.nodes["l"].role == Role.FOLLOWER


def test_learner_is_promoted_once_caught_up():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.propose("a", b"x")
    add_member(cluster, "d", ADD_LEARNER)
    cluster.tick_all(2)
    status = cluster.nodes["a"].status()
    assert status.progress["d"].is_learner
    assert status.progress["d"].match_index >= status.commit_index  # caught up: promote
    add_member(cluster, "d", ADD_VOTER)
    assert cluster.nodes["a"].conf_state == ConfState(voters=("a", "b", "c", "d"))
    assert not cluster.nodes["a"].status().progress["d"].is_learner
    assert cluster.nodes["d"].conf_state.voters == ("a", "b", "c", "d")


def test_removed_leader_steps_down_after_commit():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.nodes["a"].propose_conf_change(ConfChange(REMOVE, "a"))
    assert cluster.nodes["a"].role == Role.LEADER  # still leading until it is applied
    cluster.pump()
    assert cluster.nodes["a"].role == Role.FOLLOWER
    assert cluster.nodes["b"].conf_state.voters == ("b", "c")
    cluster.tick_all(40)
    (leader,) = cluster.leader_ids()
    assert leader in ("b", "c")
    cluster.propose(leader, b"after")
    assert b"after" in cluster.data_applied("c")


def test_removed_follower_no_longer_counts_toward_quorum():
    cluster = Cluster(("a", "b", "c", "d"))
    cluster.elect("a")
    add_member(cluster, "d", REMOVE)
    cluster.isolate("c")
    cluster.isolate("d")
    cluster.propose("a", b"x")  # a and b are a majority of {a, b, c}
    assert cluster.data_applied("b") == [b"x"]


def test_membership_is_restored_on_restart_from_log_and_applied_index():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    add_member(cluster, "d", ADD_LEARNER)
    cluster.propose("a", b"x")
    cluster.restart("b")
    assert cluster.nodes["b"].conf_state == ConfState(voters=("a", "b", "c"), learners=("d",))


def test_node_with_committed_unapplied_conf_change_does_not_campaign():
    _, storage = new_node("a", pre_vote=False)
    storage.append([Entry(1, 1, EntryType.CONF_CHANGE, ConfChange(ADD_VOTER, "d").encode())])
    storage.set_hard_state(HardState(term=1, commit=1))
    node = restart(storage, "a", pre_vote=False)
    node.campaign()
    assert node.role == Role.FOLLOWER


def test_conf_change_context_round_trips_and_the_old_encoding_still_decodes():
    change = ConfChange(ADD_LEARNER, "n4", b"10.0.0.4:7701")
    assert ConfChange.decode(change.encode()) == change
    assert ConfChange.decode(bytes([int(REMOVE)]) + b"n2") == ConfChange(REMOVE, "n2")


def test_removed_follower_applies_its_removal_and_never_moves_the_term():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    add_member(cluster, "c", REMOVE)
    cluster.tick_all(2)
    # The leader's farewell heartbeat carried the commit index of the removal to c.
    assert cluster.nodes["c"].conf_state.voters == ("a", "b")
    term = cluster.nodes["a"].term
    cluster.isolate("a")  # no leader for b either: c's campaigns are all that is left
    cluster.tick("c", 200)
    assert cluster.nodes["c"].role == Role.FOLLOWER
    assert cluster.nodes["b"].term == term


def test_a_removed_follower_that_missed_its_removal_is_told_by_the_farewells():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.isolate("c")  # c stores nothing of its removal when a and b commit and apply it
    add_member(cluster, "c", REMOVE)
    cluster.tick_all(2)
    assert cluster.nodes["a"].conf_state.voters == ("a", "b")
    assert cluster.nodes["c"].conf_state.voters == ("a", "b", "c")
    assert sorted(cluster.nodes["a"].status().progress) == ["a", "b"]  # members only
    cluster.heal()
    cluster.tick_all(4)
    assert cluster.nodes["c"].conf_state.voters == ("a", "b")
    # The farewells end after two election timeouts: c hears nothing from a again.
    cluster.tick_all(2 * cluster.config("a").election_ticks)
    heard = len(cluster.delivered)
    cluster.tick_all(10)
    assert [m for m in cluster.delivered[heard:] if "c" in (m.source, m.target)] == []


def test_farewells_stop_after_two_election_timeouts_when_the_node_never_answers():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    to_c: list[Message] = []
    cluster.filters.append(lambda m: m.target != "c" or bool(to_c.append(m)))
    add_member(cluster, "c", REMOVE)
    election_ticks = cluster.config("a").election_ticks
    cluster.tick_all(2 * election_ticks)
    sent = len(to_c)
    assert sent > 2  # the farewells went on while c stayed silent
    cluster.tick_all(10)
    assert len(to_c) == sent


def test_vote_requests_from_strangers_are_ignored_whatever_their_term():
    node, storage = new_node("a", voters=("a", "b", "c"))
    for vote_type in (MessageType.PRE_VOTE, MessageType.VOTE):
        node.step(Message(vote_type, "z", "a", term=50, log_term=50, log_index=100))
    assert node.term == 0
    assert drain_all(node, storage) == []


def test_restart_from_an_applied_checkpoint_reads_no_entry_up_to_it():
    # The node keeps its applied index and the membership as of it (a checkpoint of its
    # applied state): the restart takes that membership instead of reading back every
    # configuration entry since the snapshot point, and hands out only later entries.
    _, storage = new_node("a", pre_vote=False)
    storage.append(
        [
            Entry(1, 1, EntryType.CONF_CHANGE, ConfChange(ADD_LEARNER, "d").encode()),
            Entry(2, 1, data=b"x"),
            Entry(3, 1, data=b"y"),
        ]
    )
    storage.set_hard_state(HardState(term=1, commit=3))
    reads: list[tuple[int, int]] = []
    entries = storage.entries

    def counted(low: int, high: int, max_bytes: int) -> list[Entry]:
        reads.append((low, high))
        return entries(low, high, max_bytes)

    storage.entries = counted  # type: ignore[method-assign]
    checkpoint = ConfState(voters=("a", "b", "c"), learners=("d",))
    node = restart(storage, "a", pre_vote=False, applied_index=2, applied_conf_state=checkpoint)
    assert node.conf_state == checkpoint
    assert all(low > 2 for low, _ in reads)
    ready = node.ready()
    assert [e.index for e in ready.committed_entries] == [3]
    # Without the membership, the same restart reads the configuration entries back.
    reads.clear()
    assert restart(storage, "a", pre_vote=False, applied_index=2).conf_state == checkpoint
    assert any(low <= 1 for low, _ in reads)
