"""Leader election: Raft paper §5.2, §5.4.1, Figure 2 (RequestVote), thesis §9.6 (pre-vote)
and §6.2 / §4.2.3 (check-quorum, leader lease against disruptive servers)."""

from __future__ import annotations

from raftlog.raft.types import MessageType as T
from raftlog.raft.types import Role
from tests.unit.raft.cluster import Cluster
from tests.unit.raft.helpers import (
    drain,
    drain_all,
    make_leader,
    message,
    new_node,
    of_type,
    restart,
)


def ticks_until_campaign(seed: int, election_ticks: int = 10) -> int:
    node, _storage = new_node(seed=seed, election_ticks=election_ticks, pre_vote=False)
    for tick in range(1, 3 * election_ticks):
        node.tick()
        if node.role == Role.CANDIDATE:
            return tick
    raise AssertionError("never campaigned")


def test_election_timeout_is_randomized_in_one_to_two_election_timeouts():
    timeouts = {ticks_until_campaign(seed) for seed in range(40)}
    assert min(timeouts) >= 10
    assert max(timeouts) < 20
    assert len(timeouts) > 3  # really randomized


def test_election_timeout_comes_from_the_injected_rng_only():
    assert [ticks_until_campaign(seed) for seed in range(10)] == [
        ticks_until_campaign(seed) for seed in range(10)
    ]


def test_candidate_increments_term_votes_for_itself_and_persists_before_asking():
    node, _storage = new_node(pre_vote=False)
    node.campaign()
    ready = node.ready()
    assert node.role == Role.CANDIDATE
    assert ready.hard_state is not None
    assert (ready.hard_state.term, ready.hard_state.vote) == (1, "a")
    assert ready.must_sync  # the vote is fsynced before the requests leave
    requests = of_type(ready.messages, T.VOTE)
    assert sorted(m.target for m in requests) == ["b", "c"]
    assert all(m.term == 1 for m in requests)


def test_candidate_wins_with_majority_and_appends_noop():
    node, storage = new_node(pre_vote=False)
    node.campaign()
    drain(node, storage)
    node.step(message(T.VOTE_RESP, "b", "a", 1))
    assert node.role == Role.LEADER
    ready = drain(node, storage)
    assert [(e.index, e.term, e.data) for e in ready.entries] == [(1, 1, b"")]
    assert sorted(m.target for m in of_type(ready.messages, T.APPEND)) == ["b", "c"]


def test_candidate_loses_when_majority_rejects():
    node, storage = new_node(pre_vote=False)
    node.campaign()
    drain(node, storage)
    node.step(message(T.VOTE_RESP, "b", "a", 1, reject=True))
    assert node.role == Role.CANDIDATE
    node.step(message(T.VOTE_RESP, "c", "a", 1, reject=True))
    assert node.role == Role.FOLLOWER
    assert node.term == 1


def test_vote_granted_at_most_once_per_term():
    node, storage = new_node("a", pre_vote=False)
    node.step(message(T.VOTE, "b", "a", 1))
    node.step(message(T.VOTE, "c", "a", 1))
    node.step(message(T.VOTE, "b", "a", 1))  # a retransmission is granted again
    responses = of_type(drain(node, storage).messages, T.VOTE_RESP)
    assert [(m.target, m.reject) for m in responses] == [("b", False), ("c", True), ("b", False)]
    assert storage.hard_state.vote == "b"


def test_vote_and_term_persisted_in_same_ready_as_the_grant():
    node, _storage = new_node("a", pre_vote=False)
    node.step(message(T.VOTE, "b", "a", 3))
    ready = node.ready()
    assert ready.hard_state is not None
    assert (ready.hard_state.term, ready.hard_state.vote) == (3, "b")
    assert ready.must_sync
    assert of_type(ready.messages, T.VOTE_RESP)[0].reject is False


def test_voter_rejects_candidate_with_stale_log():
    # Our last entry has term 2; a candidate whose last term is 1 is behind (§5.4.1).
    node, storage = new_node("a", log_terms=[1, 2], term=2, pre_vote=False)
    node.step(message(T.VOTE, "b", "a", 3, log_index=5, log_term=1))
    # Same last term but a shorter log is also behind.
    node.step(message(T.VOTE, "c", "a", 4, log_index=1, log_term=2))
    responses = of_type(drain(node, storage).messages, T.VOTE_RESP)
    assert [m.reject for m in responses] == [True, True]
    assert storage.hard_state.vote is None


def test_voter_grants_candidate_with_up_to_date_log():
    node, storage = new_node("a", log_terms=[1, 2], term=2, pre_vote=False)
    node.step(message(T.VOTE, "b", "a", 3, log_index=2, log_term=2))
    responses = of_type(drain(node, storage).messages, T.VOTE_RESP)
    assert [m.reject for m in responses] == [False]


def test_candidate_steps_down_on_higher_term():
    node, storage = new_node(pre_vote=False)
    node.campaign()
    drain(node, storage)
    node.step(message(T.VOTE_RESP, "b", "a", 5, reject=True))
    assert (node.role, node.term) == (Role.FOLLOWER, 5)


def test_candidate_steps_down_on_append_from_leader_of_its_term():
    node, storage = new_node(pre_vote=False)
    node.campaign()
    drain(node, storage)
    node.step(message(T.APPEND, "b", "a", 1, log_index=0, log_term=0))
    assert (node.role, node.leader, node.term) == (Role.FOLLOWER, "b", 1)


def test_leader_steps_down_on_higher_term():
    node, storage = new_node(pre_vote=False, check_quorum=False)
    make_leader(node, storage)
    node.step(message(T.APPEND, "b", "a", 7, log_index=0, log_term=0))
    assert (node.role, node.term, node.leader) == (Role.FOLLOWER, 7, "b")


def test_messages_of_a_stale_term_are_ignored_but_answered_with_the_term():
    node, storage = new_node("a", term=5)
    node.step(message(T.APPEND, "b", "a", 3, log_index=0, log_term=0, entries=()))
    node.step(message(T.VOTE, "c", "a", 4))
    messages = drain(node, storage).messages
    assert node.term == 5
    # The stale leader learns the newer term; the stale vote request gets nothing.
    assert [(m.type, m.target, m.term) for m in messages] == [(T.APPEND_RESP, "b", 5)]


def test_follower_does_not_vote_for_second_candidate_after_hearing_from_leader():
    node, storage = new_node("a", check_quorum=False, pre_vote=False)
    node.step(message(T.HEARTBEAT, "b", "a", 2))
    node.step(message(T.VOTE, "c", "a", 2))
    responses = of_type(drain(node, storage).messages, T.VOTE_RESP)
    assert responses[0].reject


def test_pre_vote_does_not_inflate_terms():
    cluster = Cluster(("a", "b", "c"), pre_vote=True)
    cluster.elect("a")
    term = cluster.nodes["a"].term
    cluster.isolate("c")
    cluster.tick_all(100)  # c times out over and over
    assert cluster.nodes["c"].term == term
    assert cluster.nodes["c"].role == Role.PRE_CANDIDATE
    cluster.heal()
    cluster.tick_all(3)
    # c rejoins without disturbing the leader.
    assert cluster.nodes["a"].role == Role.LEADER
    assert cluster.nodes["a"].term == term
    assert cluster.nodes["c"].leader == "a"


def test_without_pre_vote_a_partitioned_node_inflates_its_term():
    cluster = Cluster(("a", "b", "c"), pre_vote=False, check_quorum=False)
    cluster.elect("a")
    cluster.isolate("c")
    cluster.tick_all(100)
    assert cluster.nodes["c"].term > cluster.nodes["a"].term + 2


def test_pre_vote_grant_changes_neither_term_nor_vote():
    node, storage = new_node("a", term=2, check_quorum=False)
    node.step(message(T.PRE_VOTE, "b", "a", 3, log_index=0, log_term=0))
    ready = drain(node, storage)
    (response,) = of_type(ready.messages, T.PRE_VOTE_RESP)
    assert (response.reject, response.term) == (False, 3)
    assert node.term == 2
    assert ready.hard_state is None


def test_pre_candidate_starts_real_election_after_winning_pre_vote():
    node, storage = new_node("a")
    node.campaign()
    assert (node.role, node.term) == (Role.PRE_CANDIDATE, 0)
    requests = of_type(drain(node, storage).messages, T.PRE_VOTE)
    assert all(m.term == 1 for m in requests)
    node.step(message(T.PRE_VOTE_RESP, "b", "a", 1))
    assert (node.role, node.term) == (Role.CANDIDATE, 1)
    assert of_type(drain(node, storage).messages, T.VOTE)


def test_pre_candidate_learns_higher_term_from_rejection():
    node, storage = new_node("a")
    node.campaign()
    drain(node, storage)
    node.step(message(T.PRE_VOTE_RESP, "b", "a", 4, reject=True))
    assert (node.role, node.term) == (Role.FOLLOWER, 4)


def test_check_quorum_leader_steps_down():
    cluster = Cluster(("a", "b", "c"), check_quorum=True)
    cluster.elect("a")
    cluster.partition(["a"], ["b", "c"])
    for _ in range(2 * 10):
        cluster.tick("a")
        cluster.pump()
    assert cluster.nodes["a"].role == Role.FOLLOWER


def test_leader_with_live_quorum_keeps_leading():
    cluster = Cluster(("a", "b", "c"), check_quorum=True)
    cluster.elect("a")
    cluster.isolate("c")
    for _ in range(50):
        cluster.tick("a")
        cluster.pump()
    assert cluster.nodes["a"].role == Role.LEADER


def test_follower_in_lease_ignores_vote_requests():
    node, storage = new_node("a", check_quorum=True, pre_vote=False)
    node.step(message(T.HEARTBEAT, "b", "a", 1))
    node.step(message(T.VOTE, "c", "a", 2, log_index=0, log_term=0))
    assert node.term == 1
    assert not of_type(drain(node, storage).messages, T.VOTE_RESP)


def test_follower_in_lease_ignores_pre_vote_requests():
    node, storage = new_node("a", check_quorum=True)
    node.step(message(T.HEARTBEAT, "b", "a", 1))
    node.step(message(T.PRE_VOTE, "c", "a", 2, log_index=0, log_term=0))
    assert not of_type(drain(node, storage).messages, T.PRE_VOTE_RESP)


def test_follower_past_lease_grants_vote():
    node, storage = new_node("a", check_quorum=True, pre_vote=False, election_ticks=10)
    node.step(message(T.HEARTBEAT, "b", "a", 1))
    drain(node, storage)
    for _ in range(10):
        node.tick()
        if node.role != Role.FOLLOWER:
            break
    node.step(message(T.VOTE, "c", "a", 5, log_index=0, log_term=0))
    responses = of_type(drain_all(node, storage), T.VOTE_RESP)
    assert responses and not responses[-1].reject


def test_elections_converge_to_one_leader():
    for seed in range(5):
        cluster = Cluster(("a", "b", "c", "d", "e"), seed=seed)
        cluster.tick_all(60)
        leaders = cluster.leader_ids()
        assert len(leaders) == 1, (seed, leaders)
        term = cluster.nodes[leaders[0]].term
        assert all(cluster.nodes[n].term == term for n in cluster.ids)


def test_restart_restores_term_vote_and_commit():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.propose("a", b"x")
    status = cluster.nodes["b"].status()
    cluster.restart("b")
    restarted = cluster.nodes["b"].status()
    assert (restarted.term, restarted.vote, restarted.commit_index) == (
        status.term,
        status.vote,
        status.commit_index,
    )
    assert restarted.role == Role.FOLLOWER


def test_restarted_node_does_not_vote_twice_in_a_term():
    node, storage = new_node("a", pre_vote=False)
    node.step(message(T.VOTE, "b", "a", 1))
    drain(node, storage)
    restarted = restart(storage, "a", pre_vote=False)
    restarted.step(message(T.VOTE, "c", "a", 1))
    (response,) = of_type(drain(restarted, storage).messages, T.VOTE_RESP)
    assert response.reject


def test_learner_never_campaigns():
    node, storage = new_node("l", voters=("a", "b"), learners=("l",))
    for _ in range(100):
        node.tick()
    assert node.role == Role.FOLLOWER
    node.campaign()
    assert node.role == Role.FOLLOWER
    assert not drain(node, storage).messages


def _ticks_to_new_leader(cluster: Cluster, dead: str, forget: bool) -> int:
    cluster.elect(dead)
    cluster.down.add(dead)
    if forget:
        for node_id in cluster.ids:
            if node_id != dead:
                cluster.nodes[node_id].forget_leader(dead)
    for tick in range(1, 100):
        # One node at a time, pumping in between: real nodes' ticks are not aligned.
        for node_id in cluster.ids:
            if node_id != dead:
                cluster.tick(node_id)
                cluster.pump()
        if [n for n in cluster.leader_ids() if n != dead]:
            return tick
    raise AssertionError("no new leader")


def test_followers_that_forget_a_dead_leader_elect_within_a_few_ticks():
    for seed in range(20):
        # Pre-vote and check-quorum stay on: the survivors' lease no longer blocks them.
        cluster = Cluster(("a", "b", "c"), seed=seed, election_ticks=10, heartbeat_ticks=2)
        assert _ticks_to_new_leader(cluster, "a", forget=True) == 1
        waited = _ticks_to_new_leader(
            Cluster(("a", "b", "c"), seed=seed, election_ticks=10, heartbeat_ticks=2),
            "a",
            forget=False,
        )
        assert waited >= 10


def test_forget_leader_ignores_a_member_that_does_not_lead():
    cluster = Cluster(("a", "b", "c"), election_ticks=10, heartbeat_ticks=2)
    cluster.elect("a")
    cluster.nodes["b"].forget_leader("c")
    cluster.nodes["a"].forget_leader("b")  # a leader forgets nobody
    assert cluster.nodes["b"].leader == "a"
    assert cluster.nodes["a"].role == Role.LEADER


def test_a_forgotten_leader_that_speaks_again_is_followed_without_an_election():
    cluster = Cluster(("a", "b", "c"), election_ticks=10, heartbeat_ticks=2)
    cluster.elect("a")
    term = cluster.nodes["b"].term
    cluster.nodes["b"].forget_leader("a")
    assert cluster.nodes["b"].leader is None
    cluster.tick_all(20)
    assert cluster.leader_ids() == ["a"]
    assert cluster.nodes["b"].leader == "a"
    # b's early pre-vote was refused by c, still in a's lease: no term was spent.
    assert cluster.nodes["b"].term == term


def test_survivors_of_a_dead_leader_take_turns_by_node_id():
    # Both survivors forget the leader in the same tick: b campaigns first, c does not
    # split the vote; if b cannot win (it lags), c campaigns heartbeat_ticks later.
    cluster = Cluster(("a", "b", "c"), election_ticks=10, heartbeat_ticks=2)
    cluster.elect("a")
    cluster.down.add("a")
    cluster.down.add("b")  # b is gone too (no majority): c must campaign on its own turn
    cluster.nodes["c"].forget_leader("a")
    for tick in range(1, 4):
        cluster.tick("c")
        cluster.pump()
        assert (cluster.nodes["c"].role == Role.PRE_CANDIDATE) == (tick == 3)
