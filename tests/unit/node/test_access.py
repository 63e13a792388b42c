"""What access rules mean: validation, pattern matching, superusers, and a decision cache that
a revoke empties; the control record that carries a change round-trips."""

import pytest

from raftlog.node.control import ChangeAccess, control_message, decode_command
from raftlog.node.errors import InvalidRequestError
from raftlog.node.security.access import (
    AccessPolicy,
    check_pattern,
    check_subject,
    parse_permissions,
    pattern_matches,
)
from raftlog.store.access_rules import AccessRules
from raftlog.store.filesystem import OsFileSystem


@pytest.mark.parametrize("subject", ["", "a b", "x" * 65, "a:b", "é"])
def test_bad_subjects_are_refused(subject: str) -> None:
    with pytest.raises(InvalidRequestError, match="subject"):
        check_subject(subject)


@pytest.mark.parametrize("pattern", ["", "a*b", "**", "orders.*", "a b", "x" * 128])
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidRequestError, match="topic_pattern"):
        check_pattern(pattern)


def test_permissions_parse_all_and_refuse_unknown_names() -> None:
    assert parse_permissions(["all"], allow_none=False) == ("admin", "consume", "produce")
    assert parse_permissions(["produce", "produce"], allow_none=False) == ("produce",)
    assert parse_permissions([], allow_none=True) == ()
    with pytest.raises(InvalidRequestError, match="at least one"):
        parse_permissions([], allow_none=False)
    with pytest.raises(InvalidRequestError, match="unknown permission 'write'"):
        parse_permissions(["write"], allow_none=False)


def test_patterns_match_names_prefixes_and_the_cluster() -> None:
    assert pattern_matches("orders", "orders")
    assert not pattern_matches("orders", "orders-eu")
    assert pattern_matches("orders-*", "orders-eu")
    assert not pattern_matches("orders-*", "order")
    assert pattern_matches("*", "anything") and pattern_matches("*", None)
    assert not pattern_matches("orders-*", None)  # only '*' covers the cluster


def test_policy_grants_by_rule_wildcard_subject_and_superuser(tmp_path) -> None:
    rules = AccessRules(OsFileSystem(), str(tmp_path))
    policy = AccessPolicy(rules, ["root"])
    assert not policy.allows("alice", "produce", "orders-eu")
    assert policy.allows("root", "admin", None)
    rules.change("alice", "orders-*", ["produce"], revoke=False)
    rules.change("*", "public", ["consume"], revoke=False)
    assert policy.allows("alice", "produce", "orders-eu")
    assert not policy.allows("alice", "consume", "orders-eu")
    assert policy.allows("bob", "consume", "public")
    assert not policy.allows("bob", "consume", "orders-eu")
    rules.change("alice", "orders-*", [], revoke=True)  # the cached grant goes with it
    assert not policy.allows("alice", "produce", "orders-eu")


def test_a_change_record_round_trips() -> None:
    change = ChangeAccess("alice", "orders-*", ("consume", "produce"), False)
    record = control_message(change)
    assert decode_command(record.body) == change
