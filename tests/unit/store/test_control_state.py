"""The store's replicated tables as one value (store/control_state.py): the document encodes
and decodes exactly, refuses another version or shape; ``replace_control_state`` replaces the
three tables wholesale and durably (also shrinking and dropping), checks before it changes a
table, and bumps the access rules' version; ``write_control_state_files`` writes what the
next open loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raftlog.store.access_rules import AccessRules
from raftlog.store.consumer_offsets import ConsumerOffsets
from raftlog.store.control_state import (
    ControlState,
    decode_control_state,
    encode_control_state,
    write_control_state_files,
)
from raftlog.store.errors import InvalidArgumentError, InvalidQueueIdError, InvalidTopicError
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.topic_config import TopicTable
from raftlog.store.validation import Limits
from tests.unit.store.test_message_store import open_store

STATE = ControlState(
    topics={"orders": 4, "audit": 1},
    consumer_offsets={
        ("billing", "orders", 0): 5,
        ("billing", "orders", 3): 7,
        ("ops", "audit", 0): 0,
    },
    access_rules={
        ("alice", "orders-*"): frozenset({"produce", "consume"}),
        ("*", "audit"): frozenset({"consume"}),
    },
)


def test_the_document_round_trips_and_is_canonical() -> None:
    data = encode_control_state(STATE)
    assert decode_control_state(data) == STATE
    reordered = ControlState(
        dict(reversed(list(STATE.topics.items()))),
        dict(reversed(list(STATE.consumer_offsets.items()))),
        dict(reversed(list(STATE.access_rules.items()))),
    )
    assert encode_control_state(reordered) == data
    assert json.loads(data)["version"] == 1
    empty = ControlState({}, {}, {})
    assert decode_control_state(encode_control_state(empty)) == empty


@pytest.mark.parametrize(
    "document",
    [
        b"{not json",
        b"[]",
        b'{"version": 2, "topics": {}, "consumer_offsets": [], "access_rules": []}',
        b'{"version": 1, "consumer_offsets": [], "access_rules": []}',
        b'{"version": 1, "topics": {"t": 0}, "consumer_offsets": [], "access_rules": []}',
        b'{"version": 1, "topics": {"t": "4"}, "consumer_offsets": [], "access_rules": []}',
        b'{"version": 1, "topics": [], "consumer_offsets": [], "access_rules": []}',
        b'{"version": 1, "topics": {}, "consumer_offsets": [["g", "t", 0, -1]], '
        b'"access_rules": []}',
        b'{"version": 1, "topics": {}, "consumer_offsets": [["", "t", 0, 1]], "access_rules": []}',
        b'{"version": 1, "topics": {}, "consumer_offsets": [["g", "t", 0]], "access_rules": []}',
        b'{"version": 1, "topics": {}, "consumer_offsets": [], "access_rules": [["a", 1, []]]}',
        b'{"version": 1, "topics": {}, "consumer_offsets": [], '
        b'"access_rules": [["a", "t", "produce"]]}',
        b"\xff",
    ],
)
def test_decoding_refuses_another_version_or_shape(document: bytes) -> None:
    with pytest.raises(ValueError):
        decode_control_state(document)


def test_replace_control_state_is_wholesale_and_durable(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.create_topic("orders", 8)  # more queues than the new table: it shrinks
    store.create_topic("gone", 2)
    store.commit_consumer_offset("billing", "orders", 0, 1)
    store.commit_consumer_offset("stale", "gone", 1, 9)
    store.access_rules.change("bob", "gone", ["admin"], revoke=False)
    version = store.access_rules.snapshot()[0]

    store.replace_control_state(STATE)

    assert store.control_state() == STATE
    assert store.describe_topic("orders").queue_count == 4
    assert store.access_rules.snapshot()[0] == version + 1
    assert store.fetch_consumer_offset("stale", "gone", 1) is None
    fs = store._fs
    store.close()
    reopened = open_store(tmp_path, fs)
    try:
        assert reopened.control_state() == STATE
    finally:
        reopened.close()


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (ControlState({"bad name": 1}, {}, {}), InvalidTopicError),
        (ControlState({"t": 0}, {}, {}), InvalidQueueIdError),
        (ControlState({"t": 1}, {("", "t", 0): 1}, {}), InvalidArgumentError),
    ],
)
def test_a_refused_state_changes_no_table(
    tmp_path: Path, state: ControlState, error: type[Exception]
) -> None:
    store = open_store(tmp_path)
    store.create_topic("orders", 2)
    store.commit_consumer_offset("billing", "orders", 1, 3)
    before = store.control_state()
    with pytest.raises(error):
        store.replace_control_state(state)
    assert store.control_state() == before
    store.close()


def test_each_table_replaces_wholesale_and_reloads(tmp_path: Path) -> None:
    fs, root = OsFileSystem(), str(tmp_path)
    topics = TopicTable(fs, root, Limits())
    topics.create_topic("a", 3)
    topics.replace_all({"b": 1})
    assert [(c.name, c.queue_count) for c in TopicTable(fs, root, Limits()).list_topics()] == [
        ("b", 1)
    ]
    offsets = ConsumerOffsets(fs, root)
    offsets.commit("g", "a", 0, 4)
    offsets.replace_all({("g", "b", 0): 2})
    assert ConsumerOffsets(fs, root).offsets_of_group("g") == {("b", 0): 2}
    rules = AccessRules(fs, root)
    rules.change("s", "a", ["admin"], revoke=False)
    rules.replace_all({("s", "b"): frozenset({"consume"}), ("t", "x"): frozenset()})
    assert dict(AccessRules(fs, root).snapshot()[1]) == {("s", "b"): frozenset({"consume"})}


def test_the_files_written_for_a_closed_store_are_what_it_opens_with(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.create_topic("old", 1)
    fs = store._fs
    store.close()
    write_control_state_files(fs, str(tmp_path), STATE)
    reopened = open_store(tmp_path, fs)
    try:
        assert reopened.control_state() == STATE
    finally:
        reopened.close()
