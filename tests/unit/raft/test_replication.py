"""Log replication: Raft paper §5.3, Figure 2 (AppendEntries), and etcd-io/raft's flow control
(PROBE / REPLICATE progress, inflight window, byte-bounded batches, fast backtracking)."""

from __future__ import annotations

from raftlog.raft import ProgressState
from raftlog.raft.types import Entry, Role
from raftlog.raft.types import MessageType as T
from tests.unit.raft.cluster import Cluster
from tests.unit.raft.helpers import (
    drain,
    drain_all,
    log_terms,
    make_leader,
    message,
    new_node,
    of_type,
)


def append(source: str, target: str, term: int, prev: tuple[int, int], entries=(), commit=0):
    return message(
        T.APPEND,
        source,
        target,
        term,
        log_index=prev[0],
        log_term=prev[1],
        entries=tuple(Entry(i, t) for i, t in entries),
        commit=commit,
    )


# --- receiver rules (Figure 2, AppendEntries) ------------------------------------------------


def test_follower_rejects_append_whose_prev_entry_term_mismatches():
    node, storage = new_node("b", log_terms=[1, 1], term=2)
    node.step(append("a", "b", 2, prev=(2, 2), entries=[(3, 2)]))
    (response,) = of_type(drain(node, storage).messages, T.APPEND_RESP)
    assert response.reject
    assert response.log_index == 2
    assert (response.reject_hint, response.hint_term) == (2, 1)
    assert log_terms(storage) == [1, 1]


def test_follower_rejects_append_beyond_its_log_with_its_last_index_as_hint():
    node, storage = new_node("b", log_terms=[1, 1], term=2)
    node.step(append("a", "b", 2, prev=(7, 2), entries=[(8, 2)]))
    (response,) = of_type(drain(node, storage).messages, T.APPEND_RESP)
    assert response.reject
    assert (response.reject_hint, response.hint_term) == (2, 1)


def test_follower_truncates_conflicting_tail():
    node, storage = new_node("b", log_terms=[1, 1, 1], term=2)
    node.step(append("a", "b", 2, prev=(1, 1), entries=[(2, 2)]))
    (response,) = of_type(drain(node, storage).messages, T.APPEND_RESP)
    assert (response.reject, response.log_index) == (False, 2)
    assert log_terms(storage) == [1, 2]


def test_follower_keeps_matching_entries_on_a_stale_append():
    # A delayed APPEND that carries entries we already hold must not cut the log short.
    node, storage = new_node("b", log_terms=[1, 1, 1], term=1)
    node.step(append("a", "b", 1, prev=(1, 1), entries=[(2, 1)]))
    (response,) = of_type(drain(node, storage).messages, T.APPEND_RESP)
    assert (response.reject, response.log_index) == (False, 2)
    assert log_terms(storage) == [1, 1, 1]


def test_follower_commit_capped_at_last_new_entry():
    node, storage = new_node("b", log_terms=[1, 1, 1], term=1)
    node.step(append("a", "b", 1, prev=(0, 0), entries=[(1, 1)], commit=3))
    drain(node, storage)
    assert node.commit_index == 1


def test_follower_answers_append_below_its_commit_with_its_commit():
    node, storage = new_node("b", log_terms=[1, 1, 1], term=1, commit=3)
    node.step(append("a", "b", 1, prev=(1, 1), entries=[(2, 1)]))
    (response,) = of_type(drain(node, storage).messages, T.APPEND_RESP)
    assert (response.reject, response.log_index) == (False, 3)


def test_follower_learns_commit_from_heartbeat():
    node, storage = new_node("b", log_terms=[1, 1, 1], term=1)
    node.step(message(T.HEARTBEAT, "a", "b", 1, commit=2))
    ready = drain(node, storage)
    assert node.commit_index == 2
    assert [e.index for e in ready.committed_entries] == [1, 2]
    assert of_type(ready.messages, T.HEARTBEAT_RESP)


def test_reject_hint_lets_leader_skip_a_whole_term():
    # Follower: [1, 2, 2, 2, 2]; the leader probes at (5, term 3).
    node, storage = new_node("b", log_terms=[1, 2, 2, 2, 2], term=3)
    node.step(append("a", "b", 3, prev=(5, 3), entries=[(6, 3)]))
    (response,) = of_type(drain(node, storage).messages, T.APPEND_RESP)
    assert (response.reject_hint, response.hint_term) == (5, 2)
    # Leader: [1, 1, 3, 3, 3]: its last entry with term <= 2 is index 2, so it probes at 2.
    leader, leader_storage = new_node("a", log_terms=[1, 1, 3, 3, 3], term=3, pre_vote=False)
    make_leader(leader, leader_storage)
    leader.step(message(T.APPEND_RESP, "b", "a", 4, log_index=6, reject=True))  # stale probe
    leader.step(
        message(T.APPEND_RESP, "b", "a", 4, log_index=5, reject=True, reject_hint=5, hint_term=2)
    )
    probes = [m for m in of_type(drain_all(leader, leader_storage), T.APPEND) if m.target == "b"]
    assert probes[-1].log_index == 2


def test_fast_backtracking_needs_few_round_trips():
    leader_log = [1] + [3] * 40
    follower_log = [1] + [2] * 60
    cluster = Cluster(
        ("a", "b", "c"),
        log_terms={"a": leader_log, "b": follower_log, "c": leader_log},
        terms={"a": 3, "b": 3, "c": 3},
    )
    cluster.elect("a")
    cluster.propose("a", b"x")
    rejections = [m for m in cluster.delivered if m.type == T.APPEND_RESP and m.reject]
    assert len(rejections) <= 3
    assert cluster.log("b") == cluster.log("a")


# --- leader rules -------------------------------------------------------------------------


def test_leader_never_overwrites_its_log():
    leader_log = [1, 2, 2]
    cluster = Cluster(
        ("a", "b", "c"),
        log_terms={"a": leader_log, "b": [1, 1, 1, 1, 1], "c": [1, 2]},
        terms={"a": 2, "b": 2, "c": 2},
    )
    cluster.elect("a")
    before = cluster.log("a")
    for data in (b"x", b"y"):
        cluster.propose("a", data)
    after = cluster.log("a")
    assert after[: len(before)] == before
    assert cluster.log("b") == after
    assert cluster.log("c") == after


def test_proposals_between_two_readys_share_one_append_per_follower():
    node, storage = new_node("a", pre_vote=False)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    drain_all(node, storage)
    for data in (b"1", b"2", b"3"):
        node.propose(data)
    appends = [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert [[e.index for e in m.entries] for m in appends] == [[2, 3, 4]]


def test_probe_sends_one_append_until_answered():
    node, storage = new_node("a", pre_vote=False)
    make_leader(node, storage)
    for data in (b"1", b"2", b"3"):
        node.propose(data)
    assert not [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert node.status().progress["b"].state == ProgressState.PROBE
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    assert node.status().progress["b"].state == ProgressState.REPLICATE
    appends = [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert [e.index for m in appends for e in m.entries] == [2, 3, 4]


def test_replicate_pipelines_up_to_the_inflight_window():
    node, storage = new_node("a", pre_vote=False, max_inflight_appends=2)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    drain_all(node, storage)
    appends = []
    for data in (b"1", b"2", b"3", b"4"):  # one Ready each: one APPEND each
        node.propose(data)
        appends += [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert [[e.index for e in m.entries] for m in appends] == [[2], [3]]
    assert node.status().progress["b"].inflight == 2
    # One ack frees one slot; the rest goes out in one batch.
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=2))
    appends = [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert [[e.index for e in m.entries] for m in appends] == [[4, 5]]


def test_heartbeat_answer_frees_a_slot_of_a_full_window():
    node, storage = new_node("a", pre_vote=False, max_inflight_appends=1)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    node.propose(b"1")
    drain_all(node, storage)
    node.propose(b"2")
    drain_all(node, storage)
    node.step(message(T.HEARTBEAT_RESP, "b", "a", 1))
    appends = [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert [[e.index for e in m.entries] for m in appends] == [[3]]


def test_append_batches_bounded_by_max_append_bytes():
    # Entries 1..9 carry 2 bytes of data each (b"e1"...).
    node, storage = new_node("a", log_terms=[1] * 9, term=1, pre_vote=False, max_append_bytes=5)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 2, log_index=9, reject=True, reject_hint=0))
    (probe,) = [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert [e.index for e in probe.entries] == [1, 2]
    node.step(message(T.APPEND_RESP, "b", "a", 2, log_index=2))
    appends = [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert [[e.index for e in m.entries] for m in appends] == [[3, 4], [5, 6], [7, 8], [9, 10]]


def test_entry_larger_than_max_append_bytes_is_sent_alone():
    node, storage = new_node("a", pre_vote=False, max_append_bytes=4)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    drain_all(node, storage)
    node.propose(b"0123456789")
    appends = [m for m in of_type(drain_all(node, storage), T.APPEND) if m.target == "b"]
    assert [[e.data for e in m.entries] for m in appends] == [[b"0123456789"]]


def test_heartbeat_carries_commit_capped_at_follower_match():
    node, storage = new_node("a", pre_vote=False, heartbeat_ticks=1)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    drain_all(node, storage)
    assert node.commit_index == 1
    node.tick()
    heartbeats = {m.target: m.commit for m in of_type(drain_all(node, storage), T.HEARTBEAT)}
    assert heartbeats == {"b": 1, "c": 0}


def test_rejection_in_replicate_falls_back_to_probe():
    node, storage = new_node("a", pre_vote=False)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    node.propose(b"1")
    node.propose(b"2")
    drain_all(node, storage)
    # b lost the APPEND carrying entry 2, so it rejects the one that follows it.
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=2, reject=True, reject_hint=1))
    assert node.status().progress["b"].state == ProgressState.PROBE


def test_report_unreachable_moves_replicate_to_probe():
    node, storage = new_node("a", pre_vote=False)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 1, log_index=1))
    node.report_unreachable("b")
    assert node.status().progress["b"].state == ProgressState.PROBE


def test_logs_converge_after_partitions_and_leader_changes():
    cluster = Cluster(("a", "b", "c", "d", "e"))
    cluster.elect("a")
    cluster.propose("a", b"1")
    cluster.partition(["a", "b"], ["c", "d", "e"])
    cluster.nodes["a"].propose(b"lost-1")
    cluster.nodes["a"].propose(b"lost-2")
    cluster.pump()
    cluster.tick_all(40)  # the majority side elects a leader, the old one steps down
    (leader,) = [n for n in cluster.leader_ids() if n in ("c", "d", "e")]
    assert cluster.nodes["a"].role != Role.LEADER
    cluster.propose(leader, b"2")
    cluster.heal()
    cluster.tick_all(5)
    cluster.propose(leader, b"3")
    logs = {n: cluster.log(n) for n in cluster.ids}
    assert all(log == logs[leader] for log in logs.values())
    for node_id in cluster.ids:
        assert cluster.data_applied(node_id) == [b"1", b"2", b"3"]
