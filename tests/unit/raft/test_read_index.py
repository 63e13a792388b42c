"""Read-index (Raft thesis §6.4): a leader answers a read with its commit index only after a
heartbeat round confirmed it still leads, and only once it committed an entry of its term."""

from __future__ import annotations

from raftlog.raft.types import MessageType as T
from raftlog.raft.types import ReadState
from tests.unit.raft.cluster import Cluster
from tests.unit.raft.helpers import drain_all, make_leader, message, new_node, of_type


def test_read_index_on_leader_is_served_after_a_heartbeat_quorum():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.nodes["a"].read_index(b"r1")
    assert not cluster.read_states["a"]
    cluster.pump()
    commit_index = cluster.nodes["a"].commit_index
    assert cluster.read_states["a"] == [ReadState(commit_index, b"r1")]
    heartbeats = [m for m in cluster.delivered if m.type == T.HEARTBEAT and m.context == b"r1"]
    assert sorted(m.target for m in heartbeats) == ["b", "c"]


def test_read_index_waits_for_commit_in_current_term():
    node, storage = new_node("a", log_terms=[1, 1], term=1, commit=1, pre_vote=False)
    make_leader(node, storage)
    node.read_index(b"r")
    messages = drain_all(node, storage)
    assert not [m for m in messages if m.type == T.HEARTBEAT]
    node.step(message(T.APPEND_RESP, "b", "a", 2, log_index=3))  # the no-op commits
    heartbeats = of_type(drain_all(node, storage), T.HEARTBEAT)
    assert [m.context for m in heartbeats] == [b"r", b"r"]
    node.step(message(T.HEARTBEAT_RESP, "b", "a", 2, context=b"r"))
    ready = node.ready()
    assert ready.read_states == [ReadState(3, b"r")]


def test_read_index_requests_are_released_in_order():
    node, storage = new_node("a", pre_vote=False)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    node.read_index(b"r1")
    node.read_index(b"r2")
    drain_all(node, storage)
    node.step(message(T.HEARTBEAT_RESP, "c", "a", 1, context=b"r2"))
    assert [rs.context for rs in node.ready().read_states] == [b"r1", b"r2"]


def test_read_index_forwarded_from_follower():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.propose("a", b"x")
    cluster.nodes["b"].read_index(b"rb")
    cluster.pump()
    assert cluster.read_states["b"] == [ReadState(cluster.nodes["a"].commit_index, b"rb")]
    assert not cluster.read_states["a"]


def test_read_index_not_served_by_a_deposed_leader():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.isolate("a")
    cluster.nodes["a"].read_index(b"stale")
    cluster.pump()
    cluster.tick_all(40)
    assert not cluster.read_states["a"]


def test_read_index_on_follower_without_leader_is_dropped():
    node, storage = new_node("b")
    node.read_index(b"r")
    assert not drain_all(node, storage)


def test_read_index_single_node_served_at_once_after_first_commit():
    cluster = Cluster(("a",))
    cluster.elect("a")
    cluster.nodes["a"].read_index(b"r")
    cluster.pump()
    assert cluster.read_states["a"] == [ReadState(1, b"r")]
