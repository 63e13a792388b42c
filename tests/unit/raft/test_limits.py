"""Behaviour at each Config limit (documented in raftlog.raft.raw_node)."""

from __future__ import annotations

import pytest

from raftlog.raft.types import MessageType as T
from raftlog.raft.types import ProposalDroppedError
from tests.unit.raft.cluster import Cluster
from tests.unit.raft.helpers import drain_all, make_leader, message, new_node


def test_propose_refuses_entry_larger_than_max_entry_bytes():
    cluster = Cluster(("a",), max_entry_bytes=8)
    cluster.elect("a")
    with pytest.raises(ProposalDroppedError, match="max_entry_bytes"):
        cluster.nodes["a"].propose(b"123456789")
    assert cluster.propose("a", b"12345678") == 2


def test_propose_refuses_beyond_max_uncommitted_bytes_until_applied():
    node, storage = new_node("a", pre_vote=False, max_uncommitted_bytes=10)
    make_leader(node, storage)
    node.propose(b"123456")
    with pytest.raises(ProposalDroppedError, match="max_uncommitted_bytes"):
        node.propose(b"123456")
    # Once committed and applied, the budget is free again.
    drain_all(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=2))
    drain_all(node, storage)
    node.propose(b"123456")


def test_one_entry_above_max_uncommitted_bytes_is_accepted_when_nothing_is_pending():
    node, storage = new_node("a", pre_vote=False, max_uncommitted_bytes=4)
    make_leader(node, storage)
    assert node.propose(b"123456789") == 2


def test_propose_on_follower_is_dropped():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    with pytest.raises(ProposalDroppedError, match="not the leader"):
        cluster.nodes["b"].propose(b"x")
    assert cluster.nodes["b"].status().last_index == 1  # nothing appended


def test_max_inflight_appends_bounds_unacknowledged_appends():
    cluster = Cluster(("a", "b", "c"), max_inflight_appends=3)
    cluster.elect("a")
    cluster.isolate("b")
    for i in range(10):
        cluster.nodes["a"].propose(b"%d" % i)
        cluster.flush()
    sent_to_b = [m for m in cluster.queue if m.type == T.APPEND and m.target == "b"]
    assert len(sent_to_b) == 3
    assert cluster.nodes["a"].status().progress["b"].inflight == 3
    cluster.queue.clear()
    cluster.heal()
    cluster.tick_all(3)
    assert len(cluster.data_applied("b")) == 10


def test_propose_batch_appends_consecutive_entries_all_or_nothing():
    cluster = Cluster(("a", "b", "c"), max_entry_bytes=4, max_uncommitted_bytes=10)
    cluster.elect("a")
    leader = cluster.nodes["a"]
    assert leader.propose_batch([b"1", b"22", b"333"]) == 4
    with pytest.raises(ProposalDroppedError, match="max_entry_bytes"):
        leader.propose_batch([b"1", b"55555"])
    with pytest.raises(ProposalDroppedError, match="max_uncommitted_bytes"):
        leader.propose_batch([b"4444", b"4444"])
    assert leader.status().last_index == 4
    cluster.pump()
    assert cluster.data_applied("c") == [b"1", b"22", b"333"]
