"""Each checker fires on the violation it names and stays quiet on a legal history."""

from __future__ import annotations

import pytest

from raftlog.raft.types import ConfState, Entry, Role

from .checkers import SafetyChecker, SafetyViolation
from .disk import LogState

VOTERS = ("n1", "n2", "n3")


def log_of(*terms: int) -> LogState:
    """A log whose entry i has term terms[i-1] and data naming its index and term."""
    state = LogState(conf_state=ConfState(voters=VOTERS))
    state.entries = [Entry(i, t, data=b"%d/%d" % (i, t)) for i, t in enumerate(terms, start=1)]
    state.changed_from_index = 1
    return state


def test_two_leaders_in_one_term_break_election_safety() -> None:
    checker = SafetyChecker(VOTERS)
    checker.observe_role("n1", Role.LEADER, 2, log_of(1))
    checker.observe_role("n1", Role.FOLLOWER, 3, log_of(1))
    checker.observe_role("n2", Role.LEADER, 3, log_of(1))
    with pytest.raises(SafetyViolation, match="election safety"):
        checker.observe_role("n3", Role.LEADER, 2, log_of(1))


def test_same_index_and_term_with_different_prefixes_breaks_log_matching() -> None:
    checker = SafetyChecker(VOTERS)
    checker.observe_durable("n1", log_of(1, 1, 2))
    checker.observe_durable("n2", log_of(1, 1))
    diverged = log_of(1, 1, 2)
    diverged.entries[1] = Entry(2, 1, data=b"other")
    with pytest.raises(SafetyViolation, match="log matching"):
        checker.observe_durable("n3", diverged)


def test_a_later_leader_missing_a_committed_entry_breaks_leader_completeness() -> None:
    checker = SafetyChecker(VOTERS)
    checker.observe_commit("n1", 2, 2, log_of(1, 2))
    checker.observe_role("n2", Role.LEADER, 2, log_of(1))  # the same term: no claim
    with pytest.raises(SafetyViolation, match="leader completeness"):
        checker.observe_role("n3", Role.LEADER, 3, log_of(1, 3))


def test_a_new_commit_is_checked_against_current_later_term_leaders() -> None:
    checker = SafetyChecker(VOTERS)
    checker.observe_role("n3", Role.LEADER, 4, log_of(1, 3))
    with pytest.raises(SafetyViolation, match="leader completeness"):
        checker.observe_commit("n1", 2, 2, log_of(1, 2))


def test_applying_different_entries_at_one_index_breaks_state_machine_safety() -> None:
    checker = SafetyChecker(VOTERS)
    checker.observe_apply("n1", 1, Entry(1, 1, data=b"a"))
    checker.observe_apply("n2", 1, Entry(1, 1, data=b"a"))
    with pytest.raises(SafetyViolation, match="state machine safety"):
        checker.observe_apply("n3", 2, Entry(1, 2, data=b"b"))


def test_an_entry_committed_but_durable_on_a_minority_is_lost() -> None:
    checker = SafetyChecker(VOTERS)
    checker.observe_durable("n1", log_of(1, 1))
    checker.observe_durable("n2", log_of(1, 1))
    checker.observe_commit("n1", 1, 2, log_of(1, 1))
    checker.check_committed_durable()
    checker.observe_durable("n2", log_of(1, 2))  # n2 lost index 2 to a conflicting append
    with pytest.raises(SafetyViolation, match="committed entry lost"):
        checker.check_committed_durable()


def test_a_legal_history_passes_every_check() -> None:
    checker = SafetyChecker(VOTERS)
    checker.observe_role("n1", Role.LEADER, 1, log_of(1, 1))
    for node_id in VOTERS[:2]:
        checker.observe_durable(node_id, log_of(1, 1))
    checker.observe_commit("n1", 1, 2, log_of(1, 1))
    checker.check_committed_durable()
    checker.observe_role("n1", Role.FOLLOWER, 2, log_of(1, 1))
    # n3 never had index 2; n2 leads term 2 with everything committed, and appends.
    checker.observe_durable("n3", log_of(1))
    checker.observe_role("n2", Role.LEADER, 2, log_of(1, 1, 2))
    checker.observe_durable("n2", log_of(1, 1, 2))
    checker.observe_durable("n3", log_of(1, 1, 2))
    checker.observe_commit("n2", 2, 3, log_of(1, 1, 2))
    for index, term in ((1, 1), (2, 1), (3, 2)):
        checker.observe_apply("n3", 2, Entry(index, term, data=b"%d/%d" % (index, term)))
    checker.check_committed_durable()
