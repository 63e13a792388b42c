"""Access control: what an access rule means, and whether a client may do something.

A rule (store/access_rules.py keeps them, applied from the replicated log) grants a subject
permissions on the topics a pattern names, like RocketMQ's per-topic PUB/SUB and admin:

- subjects: a client's name (a tokens file's name, or a client certificate's common name), or
  ``*`` for every authenticated client;
- patterns: a topic name, a prefix ending in ``*`` (``orders-*``), or ``*``: every topic and
  also the cluster itself (membership, leadership, access rules);
- permissions: ``produce``, ``consume`` (pull, queries, a group's offsets on the topic),
  ``admin`` (create a topic the pattern names; on ``*``, administer the cluster); ``all``
  names the three.

Rules this module keeps:
- Nothing is allowed unless a rule grants it (superusers, from the node's configuration, are
  granted everything: they make the first rules).
- Validation errors are InvalidRequestError naming the field, before anything is written.
- Decisions are cached per (subject, permission, topic) and the cache is dropped whenever the
  rules change (their version), so a revoke takes effect on the next call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from raftlog.node.config import CLIENT_NAME_PATTERN
from raftlog.node.errors import InvalidRequestError
from raftlog.store.access_rules import AccessRules, RuleKey

PRODUCE = "produce"
CONSUME = "consume"
ADMIN = "admin"
PERMISSIONS = (ADMIN, CONSUME, PRODUCE)
ALL = "all"
ANY = "*"
"""The subject every authenticated client is, and the pattern every topic (and the cluster)
matches."""

_PATTERN = re.compile(r"[%|A-Za-z0-9_-]{1,127}\*?")
_MAX_CACHED_DECISIONS = 4096


def check_subject(subject: str) -> str:
    if subject != ANY and not CLIENT_NAME_PATTERN.fullmatch(subject):
        raise InvalidRequestError(
            f"subject must be '*' or 1..64 characters from [A-Za-z0-9_.@-], got {subject!r}"
        )
    return subject


def check_pattern(pattern: str) -> str:
    if pattern != ANY and not _PATTERN.fullmatch(pattern):
        raise InvalidRequestError(
            "topic_pattern must be '*', a topic name, or a topic-name prefix ending in '*', "
            f"got {pattern!r}"
        )
    return pattern


def parse_permissions(names: Iterable[str], *, allow_none: bool) -> tuple[str, ...]:
    """The sorted permissions ``names`` stands for (``all`` = the three)."""
    chosen: set[str] = set()
    for name in names:
        if name == ALL:
            chosen.update(PERMISSIONS)
        elif name in PERMISSIONS:
            chosen.add(name)
        else:
            raise InvalidRequestError(
                f"unknown permission {name!r}: expected {', '.join(PERMISSIONS)} or {ALL}"
            )
    if not chosen and not allow_none:
        raise InvalidRequestError("name at least one permission to grant")
    return tuple(sorted(chosen))


def pattern_matches(pattern: str, topic: str | None) -> bool:
    """Whether ``pattern`` covers ``topic`` (None: the cluster, which only ``*`` covers)."""
    if pattern == ANY:
        return True
    if topic is None:
        return False
    if pattern.endswith("*"):
        return topic.startswith(pattern[:-1])
    return topic == pattern


def grants(
    rules: Mapping[RuleKey, frozenset[str]], subject: str, permission: str, topic: str | None
) -> bool:
    """Whether some rule of ``subject`` (or of ``*``) grants ``permission`` on ``topic``."""
    return any(
        rule_subject in (subject, ANY)
        and permission in permissions
        and pattern_matches(pattern, topic)
        for (rule_subject, pattern), permissions in rules.items()
    )


class AccessPolicy:
    """Decides calls against the node's replicated rules and its superusers."""

    def __init__(self, rules: AccessRules, superusers: Iterable[str]) -> None:
        self._rules = rules
        self._superusers = frozenset(superusers)
        # (rules version, decisions made from that version): one reference, swapped whole,
        # so a decision is only ever found beside the version it was made from.
        self._cache: tuple[int, dict[tuple[str, str, str | None], bool]] = (-1, {})

    def allows(self, subject: str, permission: str, topic: str | None) -> bool:
        if subject in self._superusers:
            return True
        version, rules = self._rules.snapshot()
        cached_version, cache = self._cache
        if cached_version != version or len(cache) >= _MAX_CACHED_DECISIONS:
            cache = {}
            self._cache = (version, cache)
        key = (subject, permission, topic)
        decision = cache.get(key)
        if decision is None:
            decision = grants(rules, subject, permission, topic)
            cache[key] = decision
        return decision
