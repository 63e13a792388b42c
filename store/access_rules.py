"""Access rules: which subject may do what on which topics, as the replicated log set them.

The node decides what a rule means (node/security/access.py); this table only keeps them,
the way ``consumer_offsets.py`` keeps offsets: applied in log order on every replica, so every
member holds the same rules.

Rules this module keeps:
- A rule is ``(subject, topic_pattern) -> permissions`` (a non-empty set of names); granting
  adds to a rule, revoking removes from it (no names: all), and a rule left empty is dropped.
  Both are idempotent, so re-applying a change after a crash changes nothing.
- Persisted as JSON under ``<root>/config/access_rules.json`` with an atomic replace after
  every change (changes are rare), so a crash leaves the previous or the new table.
- Readers get an immutable snapshot with a version that grows with every change, so a cache
  of decisions knows when to drop itself.
- ``replace_all`` (a Raft follower installing its leader's tables with a snapshot) writes the
  whole new table durably, then swaps it in as one change (one new version);
  ``write_access_rules`` writes the same file for a store that is not open.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from raftlog.store.atomic_file import read_json_document, write_json_document
from raftlog.store.filesystem import FileSystem

ACCESS_RULES_FILE = os.path.join("config", "access_rules.json")
_FORMAT_VERSION = 1

RuleKey = tuple[str, str]
"""(subject, topic_pattern)."""


class AccessRules:
    """The table of access rules, loaded at open, saved on every change."""

    def __init__(self, fs: FileSystem, root_dir: str) -> None:
        self._fs = fs
        self._path = os.path.join(root_dir, ACCESS_RULES_FILE)
        self._lock = threading.Lock()
        self._rules: dict[RuleKey, frozenset[str]] = {}
        self._version = 0
        self._snapshot: Mapping[RuleKey, frozenset[str]] = MappingProxyType({})
        self._load()

    def change(
        self, subject: str, topic_pattern: str, permissions: Iterable[str], *, revoke: bool
    ) -> None:
        """Grant ``permissions`` to ``subject`` on ``topic_pattern``, or revoke them (none
        named: all); durable when it returns."""
        key = (subject, topic_pattern)
        names = frozenset(permissions)
        with self._lock:
            current = self._rules.get(key, frozenset())
            # Revoking nothing in particular revokes everything.
            revoked = current - names if names else frozenset()
            updated = revoked if revoke else current | names
            if updated == current:
                return
            if updated:
                self._rules[key] = updated
            else:
                del self._rules[key]
            self._version += 1
            self._snapshot = MappingProxyType(dict(self._rules))
            _write(self._fs, self._path, self._rules)

    def replace_all(self, rules: Mapping[RuleKey, frozenset[str]]) -> None:
        """Make the table exactly ``rules`` (rules with no permission are left out), durable
        when it returns."""
        updated = {key: frozenset(names) for key, names in rules.items() if names}
        with self._lock:
            _write(self._fs, self._path, updated)
            self._rules = updated
            self._version += 1
            self._snapshot = MappingProxyType(dict(updated))

    def snapshot(self) -> tuple[int, Mapping[RuleKey, frozenset[str]]]:
        """(version, the rules as of now); the mapping never changes after it is handed out."""
        with self._lock:
            return self._version, self._snapshot

    def _load(self) -> None:
        document = read_json_document(self._fs, self._path, _FORMAT_VERSION)
        if document is None:
            return
        try:
            for subject, pattern, permissions in document["rules"]:
                if not (isinstance(subject, str) and isinstance(pattern, str)):
                    raise TypeError("subject and pattern must be strings")
                names = frozenset(str(name) for name in permissions)
                if names:
                    self._rules[(subject, pattern)] = names
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{self._path}: malformed access rules: {error}") from error
        self._version = 1
        self._snapshot = MappingProxyType(dict(self._rules))


def write_access_rules(
    fs: FileSystem, root_dir: str, rules: Mapping[RuleKey, frozenset[str]]
) -> None:
    """Replace the table file under ``root_dir`` by ``rules``, durably, for a store that is not
    open (its next open loads it)."""
    _write(fs, os.path.join(root_dir, ACCESS_RULES_FILE), rules)


def _write(fs: FileSystem, path: str, rules: Mapping[RuleKey, frozenset[str]]) -> None:
    rows = [[s, p, sorted(names)] for (s, p), names in sorted(rules.items()) if names]
    write_json_document(fs, path, _FORMAT_VERSION, {"rules": rows})
