"""The Ready contract of raftlog.raft.types: what each Ready carries, and misuse caught."""

from __future__ import annotations

import pytest

from raftlog.raft.types import Entry, Role, SoftState
from raftlog.raft.types import MessageType as T
from tests.unit.raft.helpers import drain, message, new_node, restart


def test_idle_node_has_no_ready():
    node, _ = new_node("a")
    assert not node.has_ready()


def test_ready_twice_without_advance_is_a_programmer_error():
    node, _ = new_node("a", pre_vote=False)
    node.campaign()
    node.ready()
    with pytest.raises(AssertionError):
        node.ready()


def test_soft_state_reported_on_role_change_only():
    node, storage = new_node("a", pre_vote=False)
    node.campaign()
    ready = drain(node, storage)
    assert ready.soft_state == SoftState(leader=None, role=Role.CANDIDATE)
    node.step(message(T.VOTE_RESP, "c", "a", 1, reject=True))
    assert drain(node, storage).soft_state is None


def test_new_entries_need_sync_and_appear_once():
    node, storage = new_node("b", log_terms=[1], term=1)
    node.step(message(T.APPEND, "a", "b", 1, log_index=1, log_term=1, entries=(), commit=0))
    drain(node, storage)
    node.step(
        message(T.APPEND, "a", "b", 1, log_index=1, log_term=1, entries=(Entry(2, 1, data=b"x"),))
    )
    ready = drain(node, storage)
    assert [e.index for e in ready.entries] == [2]
    assert ready.must_sync
    assert not node.has_ready()


def test_step_between_ready_and_advance_is_kept_for_the_next_ready():
    node, storage = new_node("b", log_terms=[1], term=1)
    node.step(message(T.HEARTBEAT, "a", "b", 1, commit=1))
    ready = node.ready()
    node.step(message(T.HEARTBEAT, "a", "b", 1, commit=1, context=b"late"))
    storage.set_hard_state(ready.hard_state)  # type: ignore[arg-type]
    node.advance(ready)
    assert [m.context for m in node.ready().messages] == [b"late"]


def test_unknown_and_misaddressed_messages_are_ignored():
    node, storage = new_node("a")
    node.step(message(T.APPEND_RESP, "zz", "a", 0, log_index=99))
    node.step(message(T.HEARTBEAT, "b", "someone-else", 1))
    node.step(message(T.SNAPSHOT, "b", "a", 0))
    node.step(message(T.READ_INDEX_RESP, "b", "a", 0))
    assert node.term == 0
    assert not drain(node, storage).entries


def test_restart_with_applied_index_beyond_a_lost_commit_index():
    # The commit index is written without fsync; entries the application applied were
    # committed all the same.
    _node, storage = new_node("b", log_terms=[1, 1, 1], term=1, commit=1)
    restarted = restart(storage, "b", applied_index=3)
    status = restarted.status()
    assert (status.commit_index, status.applied_index) == (3, 3)
    assert not drain(restarted, storage).committed_entries
