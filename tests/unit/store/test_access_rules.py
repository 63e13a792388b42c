"""The access-rule table: grant adds, revoke removes (none named: all), both idempotent, every
change durable and versioned; a malformed file fails the load naming it."""

from pathlib import Path

import pytest

from raftlog.store.access_rules import ACCESS_RULES_FILE, AccessRules
from raftlog.store.filesystem import OsFileSystem


def test_grant_revoke_reload_and_versions(tmp_path: Path) -> None:
    fs = OsFileSystem()
    rules = AccessRules(fs, str(tmp_path))
    assert rules.snapshot() == (0, {})
    rules.change("alice", "orders-*", ["produce"], revoke=False)
    rules.change("alice", "orders-*", ["consume", "produce"], revoke=False)
    rules.change("*", "public", ["consume"], revoke=False)
    version, table = rules.snapshot()
    assert version == 3
    assert dict(table) == {
        ("alice", "orders-*"): frozenset({"produce", "consume"}),
        ("*", "public"): frozenset({"consume"}),
    }
    rules.change("alice", "orders-*", ["consume"], revoke=False)  # nothing new: no version
    assert rules.snapshot()[0] == 3
    rules.change("alice", "orders-*", ["produce"], revoke=True)
    rules.change("*", "public", [], revoke=True)  # no names: everything
    rules.change("bob", "x", [], revoke=True)  # revoking what was never granted: no-op
    reloaded = AccessRules(fs, str(tmp_path))
    assert dict(reloaded.snapshot()[1]) == {("alice", "orders-*"): frozenset({"consume"})}


def test_a_snapshot_never_changes_after_it_is_handed_out(tmp_path: Path) -> None:
    rules = AccessRules(OsFileSystem(), str(tmp_path))
    rules.change("a", "t", ["produce"], revoke=False)
    _, before = rules.snapshot()
    rules.change("a", "t", [], revoke=True)
    assert dict(before) == {("a", "t"): frozenset({"produce"})}
    with pytest.raises(TypeError):
        before[("b", "t")] = frozenset()  # type: ignore[index]


def test_a_malformed_file_fails_the_load_naming_it(tmp_path: Path) -> None:
    path = tmp_path / ACCESS_RULES_FILE
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "rules": [["a", 5, ["produce"]]]}')
    with pytest.raises(ValueError, match=r"access_rules\.json"):
        AccessRules(OsFileSystem(), str(tmp_path))
