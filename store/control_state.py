"""ControlState: the store's replicated tables -- topics, consumer-group offsets, access rules --
as one value, its versioned JSON document, and the wholesale replacement of the three table
files for a store that is not open.

A Raft leader sends it with a snapshot's segments, and the follower installs it in place of
its own tables (``MessageStore.replace_control_state``; node/replication/snapshot_install.py
says why that is sound): the control records that built the tables may lie in segments
retention deleted, so the segments alone cannot rebuild them.

Rules this module keeps:
- The document is compact JSON with a ``version``; decoding refuses another version or any
  other shape with a ValueError (a newer node's document is never half-installed), and
  checks every value's type and range, so what it returns can be written as is.
- Nothing here knows Raft: the document holds the tables, not where in a log they stand.
- ``write_control_state_files`` writes each table file atomically (topics first, then
  offsets, then rules); the three together are not atomic -- the caller's own marker makes
  a crash between them redo all three (snapshot_install.resume_interrupted_install).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raftlog.store.access_rules import RuleKey, write_access_rules
from raftlog.store.consumer_offsets import write_consumer_offsets
from raftlog.store.filesystem import FileSystem
from raftlog.store.topic_config import MAX_QUEUE_COUNT, write_topic_table

CONTROL_STATE_VERSION = 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ControlState:
    topics: Mapping[str, int]
    """Topic -> queue count."""
    consumer_offsets: Mapping[tuple[str, str, int], int]
    """(group, topic, queue_id) -> the next queue offset the group consumes."""
    access_rules: Mapping[RuleKey, frozenset[str]]
    """(subject, topic_pattern) -> permission names (never empty)."""


def encode_control_state(state: ControlState) -> bytes:
    """The versioned JSON document of ``state`` (keys and rows sorted: the same state always
    encodes to the same bytes)."""
    document = {
        "version": CONTROL_STATE_VERSION,
        "topics": dict(sorted(state.topics.items())),
        "consumer_offsets": [
            [group, topic, queue_id, offset]
            for (group, topic, queue_id), offset in sorted(state.consumer_offsets.items())
        ],
        "access_rules": [
            [subject, pattern, sorted(names)]
            for (subject, pattern), names in sorted(state.access_rules.items())
            if names
        ],
    }
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def decode_control_state(data: bytes) -> ControlState:
    """The state a document holds; ValueError for another version or shape, or a value out
    of range."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict):
            raise ValueError("not a JSON object")
        if document.get("version") != CONTROL_STATE_VERSION:
            raise ValueError(f"version {document.get('version')!r} is not {CONTROL_STATE_VERSION}")
        return ControlState(
            _topics(document["topics"]),
            _offsets(document["consumer_offsets"]),
            _rules(document["access_rules"]),
        )
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"not a valid control state document: {error}") from error


def write_control_state_files(fs: FileSystem, root_dir: str, state: ControlState) -> None:
    """Replace the three table files under ``root_dir`` by ``state``, each durably and
    atomically, for a store that is not open (its next open loads and checks them)."""
    write_topic_table(fs, root_dir, state.topics)
    write_consumer_offsets(fs, root_dir, state.consumer_offsets)
    write_access_rules(fs, root_dir, state.access_rules)


def _topics(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        raise TypeError("topics is not an object")
    for name, count in value.items():
        if type(count) is not int or not 1 <= count <= MAX_QUEUE_COUNT:
            raise ValueError(f"topic {name!r} has queue count {count!r}")
    return dict(value)


def _offsets(value: Any) -> dict[tuple[str, str, int], int]:
    offsets: dict[tuple[str, str, int], int] = {}
    for group, topic, queue_id, offset in value:
        if not (isinstance(group, str) and group and isinstance(topic, str)):
            raise TypeError(f"offset row {group!r}, {topic!r}: group and topic must be strings")
        for number in (queue_id, offset):
            if type(number) is not int or not 0 <= number <= _INT64_MAX:
                raise ValueError(f"offset row {group!r}, {topic!r}: {number!r} is out of range")
        offsets[(group, topic, queue_id)] = offset
    return offsets


def _rules(value: Any) -> dict[RuleKey, frozenset[str]]:
    rules: dict[RuleKey, frozenset[str]] = {}
    for subject, pattern, names in value:
        if not (isinstance(subject, str) and isinstance(pattern, str)):
            raise TypeError(f"rule {subject!r}, {pattern!r}: subject and pattern must be strings")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"rule {subject!r}, {pattern!r}: permissions must be strings")
        if names:
            rules[(subject, pattern)] = frozenset(names)
    return rules
