"""Far-behind followers: when the entries a follower needs are compacted, the leader sends a
SNAPSHOT (the core does the index/term bookkeeping; raftlog's node moves segments)."""

from __future__ import annotations

from raftlog.raft import ProgressState
from raftlog.raft.types import ConfChange, ConfChangeType, ConfState, SnapshotMeta
from raftlog.raft.types import MessageType as T
from tests.unit.raft.cluster import Cluster
from tests.unit.raft.helpers import drain, drain_all, make_leader, message, new_node, of_type


def test_snapshot_sent_when_follower_needs_compacted_entries():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.isolate("c")
    for data in (b"1", b"2", b"3"):
        cluster.propose("a", data)
    snapshot_index = cluster.compact("a")
    cluster.heal()
    cluster.tick_all(3)
    snapshots = [m for m in cluster.delivered if m.type == T.SNAPSHOT]
    assert [m.target for m in snapshots] == ["c"]
    assert snapshots[0].snapshot is not None and snapshots[0].snapshot.index == snapshot_index
    assert cluster.storages["c"].snapshot().index == snapshot_index
    cluster.propose("a", b"4")
    assert cluster.data_applied("c") == [b"1", b"2", b"3", b"4"]
    assert cluster.log("c") == cluster.log("a")
    assert cluster.nodes["a"].status().progress["c"].state == ProgressState.REPLICATE


def test_new_node_catches_up_through_snapshot():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    cluster.propose("a", b"1")
    cluster.compact("a")
    cluster.compact("b")
    cluster.compact("c")
    # An empty node knowing nothing of the cluster learns membership from the snapshot.
    cluster.add_node("d", ConfState(voters=()))
    cluster.nodes["a"].propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, "d"))
    cluster.pump()
    cluster.tick_all(3)
    assert cluster.data_applied("d") == [b"1"]
    assert cluster.nodes["d"].conf_state.learners == ("d",)


def test_follower_restores_snapshot_and_acks_its_index():
    node, storage = new_node("b", log_terms=[1, 1], term=1)
    meta = SnapshotMeta(10, 3, ConfState(voters=("a", "b", "c"), learners=("d",)))
    node.step(message(T.SNAPSHOT, "a", "b", 3, snapshot=meta))
    ready = node.ready()
    assert ready.snapshot == meta
    assert ready.must_sync
    assert not ready.committed_entries
    (response,) = of_type(ready.messages, T.APPEND_RESP)
    assert (response.reject, response.log_index) == (False, 10)
    storage.apply_snapshot(meta)
    node.advance(ready)
    status = node.status()
    assert (status.commit_index, status.applied_index, status.last_index) == (10, 10, 10)
    assert status.conf_state == meta.conf_state
    assert (storage.first_index(), storage.term(10)) == (11, 3)


def test_stale_snapshot_is_answered_with_the_commit_index():
    node, storage = new_node("b", log_terms=[1, 1, 1], term=1, commit=3)
    meta = SnapshotMeta(2, 1, ConfState(voters=("a", "b", "c")))
    node.step(message(T.SNAPSHOT, "a", "b", 1, snapshot=meta))
    ready = drain(node, storage)
    assert ready.snapshot is None
    (response,) = of_type(ready.messages, T.APPEND_RESP)
    assert response.log_index == 3


def test_snapshot_whose_point_we_hold_only_advances_commit():
    node, storage = new_node("b", log_terms=[1, 1, 1], term=1)
    meta = SnapshotMeta(2, 1, ConfState(voters=("a", "b", "c")))
    node.step(message(T.SNAPSHOT, "a", "b", 1, snapshot=meta))
    ready = drain(node, storage)
    assert ready.snapshot is None
    assert node.commit_index == 2
    assert node.status().last_index == 3


def leader_with_compacted_log():
    node, storage = new_node("a", log_terms=[1] * 5, term=1, commit=5, pre_vote=False)
    drain(node, storage)  # apply 1..5
    storage.compact(5, ConfState(voters=("a", "b", "c")))
    make_leader(node, storage)  # no-op at 6
    # b answers the first probe (prev 5): it has nothing.
    node.step(message(T.APPEND_RESP, "b", "a", 2, log_index=5, reject=True, reject_hint=0))
    return node, storage


def test_leader_moves_progress_to_snapshot_state_and_sends_nothing_else():
    node, storage = leader_with_compacted_log()
    messages = [m for m in drain_all(node, storage) if m.target == "b"]
    assert [m.type for m in messages] == [T.SNAPSHOT]
    assert messages[0].snapshot is not None and messages[0].snapshot.index == 5
    assert node.status().progress["b"].state == ProgressState.SNAPSHOT
    node.propose(b"x")
    assert not [m for m in drain_all(node, storage) if m.target == "b"]


def test_report_snapshot_failure_resends_after_next_heartbeat_answer():
    node, storage = leader_with_compacted_log()
    drain_all(node, storage)
    node.report_snapshot("b", success=False)
    assert node.status().progress["b"].state == ProgressState.PROBE
    assert not [m for m in drain_all(node, storage) if m.target == "b"]
    node.step(message(T.HEARTBEAT_RESP, "b", "a", 2))
    messages = [m for m in drain_all(node, storage) if m.target == "b"]
    assert [m.type for m in messages] == [T.SNAPSHOT]


def test_report_snapshot_success_resumes_after_the_snapshot():
    node, storage = leader_with_compacted_log()
    drain_all(node, storage)
    node.report_snapshot("b", success=True)
    progress = node.status().progress["b"]
    assert (progress.state, progress.next_index) == (ProgressState.PROBE, 6)
