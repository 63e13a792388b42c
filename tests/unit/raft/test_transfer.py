"""Leadership transfer (Raft thesis §3.10): TIMEOUT_NOW to a caught-up target, proposals
refused meanwhile, abandoned after an election timeout; Config.preferred_leader."""

from __future__ import annotations

import pytest

from raftlog.raft.types import MessageType as T
from raftlog.raft.types import ProposalDroppedError, Role
from tests.unit.raft.cluster import Cluster
from tests.unit.raft.helpers import drain_all, message, new_node, of_type


def test_leadership_transfer_to_caught_up_follower():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    term = cluster.nodes["a"].term
    cluster.nodes["a"].transfer_leadership("b")
    cluster.pump()
    assert cluster.nodes["b"].role == Role.LEADER
    assert cluster.nodes["b"].term == term + 1
    assert cluster.nodes["a"].leader == "b"
    assert any(m.type == T.TIMEOUT_NOW for m in cluster.delivered)


def test_leadership_transfer_catches_up_lagging_target_first():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.isolate("b")
    cluster.propose("a", b"x")
    cluster.propose("a", b"y")
    cluster.heal()
    cluster.delivered.clear()
    cluster.nodes["a"].transfer_leadership("b")
    cluster.pump()
    types = [m.type for m in cluster.delivered if m.target == "b"]
    assert types.index(T.APPEND) < types.index(T.TIMEOUT_NOW)
    assert cluster.nodes["b"].role == Role.LEADER
    cluster.propose("b", b"z")
    assert cluster.data_applied("b") == [b"x", b"y", b"z"]


def test_leadership_transfer_without_target_picks_most_up_to_date_voter():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.isolate("b")
    cluster.propose("a", b"x")  # c has it, b does not
    cluster.nodes["a"].transfer_leadership()
    assert cluster.nodes["a"].status().lead_transferee == "c"
    cluster.pump()
    assert cluster.nodes["c"].role == Role.LEADER


def test_proposals_dropped_while_transfer_in_progress():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.isolate("b")
    cluster.nodes["a"].transfer_leadership("b")
    with pytest.raises(ProposalDroppedError, match="transfer"):
        cluster.nodes["a"].propose(b"x")


def test_leadership_transfer_aborts_after_election_timeout():
    cluster = Cluster(("a", "b", "c"), election_ticks=10)
    cluster.elect("a")
    cluster.isolate("b")
    cluster.nodes["a"].transfer_leadership("b")
    for _ in range(10):
        cluster.tick("a")
        cluster.pump()
    assert cluster.nodes["a"].role == Role.LEADER
    assert cluster.nodes["a"].status().lead_transferee is None
    cluster.propose("a", b"x")
    assert cluster.data_applied("c") == [b"x"]


def test_transfer_campaign_is_not_blocked_by_the_follower_lease():
    node, storage = new_node("a", check_quorum=True)
    node.step(message(T.HEARTBEAT, "b", "a", 1))  # a live leader: in lease
    node.step(message(T.VOTE, "c", "a", 2, context=b"transfer"))
    responses = of_type(drain_all(node, storage), T.VOTE_RESP)
    assert [r.reject for r in responses] == [False]


def test_timeout_now_skips_pre_vote():
    node, storage = new_node("b", pre_vote=True)
    node.step(message(T.TIMEOUT_NOW, "a", "b", 0))
    assert node.role == Role.CANDIDATE
    votes = of_type(drain_all(node, storage), T.VOTE)
    assert votes and all(v.context == b"transfer" for v in votes)


def test_transfer_on_follower_is_a_no_op():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.nodes["b"].transfer_leadership("c")
    cluster.pump()
    assert cluster.nodes["a"].role == Role.LEADER


def test_preferred_leader_takes_over_once_caught_up():
    cluster = Cluster(("a", "b", "c"), preferred_leader="b", election_ticks=10)
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.tick_all(25)
    assert cluster.leader_ids() == ["b"]
    cluster.tick_all(25)
    assert cluster.leader_ids() == ["b"]  # and it stays there
