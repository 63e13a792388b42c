"""Each PlantedBug, turned on, really changes the guarded behaviour (the simulation proves it
finds them; these tests prove the switch is wired)."""

from __future__ import annotations

from raftlog.raft.types import Entry, PlantedBug
from raftlog.raft.types import MessageType as T
from tests.unit.raft.helpers import (
    drain,
    log_terms,
    make_leader,
    message,
    new_node,
    of_type,
    restart,
)


def test_commit_previous_term_by_counting_commits_an_old_termEntry():
    bugs = frozenset({PlantedBug.COMMIT_PREVIOUS_TERM_BY_COUNTING})
    node, storage = new_node("a", log_terms=[1, 2], term=2, pre_vote=False, planted_bugs=bugs)
    make_leader(node, storage)
    node.step(message(T.APPEND_RESP, "b", "a", 3, log_index=2))
    assert node.commit_index == 2  # correct Raft keeps it at 0 (test_commit.py)


def test_vote_not_persisted_lets_a_restarted_node_vote_twice_in_a_term():
    bugs = frozenset({PlantedBug.VOTE_NOT_PERSISTED})
    node, storage = new_node("a", pre_vote=False, planted_bugs=bugs)
    node.step(message(T.VOTE, "b", "a", 1))
    ready = drain(node, storage)
    assert of_type(ready.messages, T.VOTE_RESP)[0].reject is False
    assert ready.hard_state is not None and ready.hard_state.vote is None
    restarted = restart(storage, "a", pre_vote=False, planted_bugs=bugs)
    restarted.step(message(T.VOTE, "c", "a", 1))
    (response,) = of_type(drain(restarted, storage).messages, T.VOTE_RESP)
    assert response.reject is False  # a second vote in term 1


def test_skip_log_matching_check_accepts_append_after_a_mismatchingEntry():
    bugs = frozenset({PlantedBug.SKIP_LOG_MATCHING_CHECK})
    node, storage = new_node("b", log_terms=[1, 1], term=2, planted_bugs=bugs)
    append = message(
        T.APPEND, "a", "b", 2, log_index=2, log_term=2, entries=(Entry(3, 2),), commit=3
    )
    node.step(append)
    (response,) = of_type(drain(node, storage).messages, T.APPEND_RESP)
    assert (response.reject, response.log_index) == (False, 3)
    assert log_terms(storage) == [1, 1, 2]  # entry 2 (term 1) now precedes a term-2 entry
    assert node.commit_index == 3


def test_skip_log_matching_check_still_refuses_to_leave_a_hole():
    bugs = frozenset({PlantedBug.SKIP_LOG_MATCHING_CHECK})
    node, storage = new_node("b", log_terms=[1], term=2, planted_bugs=bugs)
    node.step(message(T.APPEND, "a", "b", 2, log_index=5, log_term=2, entries=(Entry(6, 2),)))
    (response,) = of_type(drain(node, storage).messages, T.APPEND_RESP)
    assert response.reject
