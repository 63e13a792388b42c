"""Commitment: Raft paper §5.3-§5.4.2 (Figure 8), Figure 2's leader rule for commitIndex, and
the Ready contract's rule that the leader counts its own copy only once it is durable."""

from __future__ import annotations

from raftlog.raft.types import MessageType as T
from tests.unit.raft.cluster import Cluster
from tests.unit.raft.helpers import drain, drain_all, make_leader, message, new_node


def test_commit_index_advances_to_majority_match():
    node, storage = new_node("a", voters=("a", "b", "c", "d", "e"), pre_vote=False)
    make_leader(node, storage)  # no-op at index 1
    for data in (b"2", b"3", b"4"):
        node.propose(data)
    drain_all(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=4))
    assert node.commit_index == 0  # a and b: 2 of 5
    node.step(message(T.APPEND_RESP, "c", "a", 1, log_index=3))
    assert node.commit_index == 3  # a, b, c store 3
    node.step(message(T.APPEND_RESP, "d", "a", 1, log_index=4))
    assert node.commit_index == 4


def test_leader_commits_only_current_term_entries():
    # Figure 8: entry 2 (term 2) is on a majority, but the leader is in term 3; counting
    # replicas must not commit it - only the leader's own no-op (index 3) can.
    node, storage = new_node("a", log_terms=[1, 2], term=2, pre_vote=False)
    make_leader(node, storage)
    assert node.term == 3
    node.step(message(T.APPEND_RESP, "b", "a", 3, log_index=2))
    assert node.commit_index == 0
    node.step(message(T.APPEND_RESP, "b", "a", 3, log_index=3))
    assert node.commit_index == 3  # the no-op commits, and with it entries 1 and 2


def test_new_leader_commits_inherited_entries_through_its_noop():
    cluster = Cluster(("a", "b", "c"), log_terms={"a": [1, 1], "b": [1, 1]}, terms={"a": 1, "b": 1})
    cluster.elect("a")
    assert cluster.nodes["a"].commit_index == 3
    assert [e.index for e in cluster.applied["c"]] == [1, 2, 3]


def test_leader_counts_its_own_entry_only_after_it_is_persisted():
    node, storage = new_node("a", pre_vote=False)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    assert node.commit_index == 1
    index = node.propose(b"x")
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=index))
    assert node.commit_index == 1  # b has it, our own copy is not durable yet: 1 of 3
    ready = node.ready()
    storage.append(ready.entries)
    node.advance(ready)
    assert node.commit_index == index


def test_committed_entries_are_handed_out_once_in_order():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    for data in (b"1", b"2", b"3"):
        cluster.propose("a", data)
    for node_id in cluster.ids:
        indexes = [e.index for e in cluster.applied[node_id]]
        assert indexes == list(range(1, len(indexes) + 1))
        assert cluster.data_applied(node_id) == [b"1", b"2", b"3"]


def test_committed_entry_survives_leader_change():
    # Leader completeness (§5.4): a node missing a committed entry cannot become leader.
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.isolate("c")
    cluster.propose("a", b"x")  # committed by a and b
    cluster.heal()
    cluster.isolate("a")
    cluster.nodes["c"].campaign()
    cluster.pump()
    assert cluster.nodes["c"].role.name != "LEADER"  # b refuses: c's log is behind
    cluster.elect("b")
    cluster.propose("b", b"y")
    assert cluster.data_applied("c") == [b"x", b"y"]


def test_max_committed_bytes_per_ready_splits_committed_entries():
    # Entries 1..5 carry 2 bytes each; all are committed.
    node, storage = new_node(
        "a", log_terms=[1] * 5, term=1, commit=5, max_committed_bytes_per_ready=4
    )
    batches = []
    while node.has_ready():
        batches.append([e.index for e in drain(node, storage).committed_entries])
    assert batches == [[1, 2], [3, 4], [5]]


def test_commit_only_change_needs_no_sync():
    node, _storage = new_node("b", log_terms=[1, 1], term=1)
    node.step(message(T.HEARTBEAT, "a", "b", 1, commit=2))
    ready = node.ready()
    assert ready.hard_state is not None and ready.hard_state.commit == 2
    assert not ready.must_sync


def _appends_sent(cluster: Cluster) -> int:
    return sum(1 for m in cluster.delivered if m.type == T.APPEND)


def test_announce_commit_on_tick_tells_followers_with_the_next_append_or_tick():
    cluster = Cluster(("a", "b", "c"), announce_commit_on_tick=True, heartbeat_ticks=5)
    cluster.elect("a")
    cluster.tick("a")
    cluster.pump()
    before = _appends_sent(cluster)
    cluster.propose("a", b"w1")
    # One APPEND per follower (no commit-only APPENDs): the followers do not know yet.
    assert _appends_sent(cluster) - before == 2
    assert cluster.nodes["a"].commit_index == 2  # the no-op is 1
    assert b"w1" not in cluster.data_applied("b") + cluster.data_applied("c")
    # The next write carries the commit index of the previous one.
    cluster.propose("a", b"w2")
    assert cluster.data_applied("b") == [b"w1"] == cluster.data_applied("c")
    # With no write after it, the leader's next tick tells them (not its next heartbeat).
    cluster.tick("a")
    cluster.pump()
    assert cluster.data_applied("b") == [b"w1", b"w2"] == cluster.data_applied("c")


def test_eager_announcement_sends_commit_only_appends():
    cluster = Cluster(("a", "b", "c"), heartbeat_ticks=5)
    cluster.elect("a")
    before = _appends_sent(cluster)
    cluster.propose("a", b"w1")
    assert _appends_sent(cluster) - before == 4
    assert cluster.data_applied("b") == [b"w1"] == cluster.data_applied("c")
