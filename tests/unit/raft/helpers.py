"""Helpers for driving one RawNode by hand: build it on a prepared MemoryStorage, hand it
messages, and run its Ready through the contract (persist -> collect -> advance)."""

from __future__ import annotations

import random
from collections.abc import Iterable

from raftlog.raft import Config, MemoryStorage, RawNode
from raftlog.raft.types import ConfState, Entry, HardState, Message, MessageType, NodeId, Ready


def new_node(
    node_id: NodeId = "a",
    voters: Iterable[NodeId] = ("a", "b", "c"),
    *,
    learners: Iterable[NodeId] = (),
    log_terms: Iterable[int] = (),
    term: int = 0,
    vote: NodeId | None = None,
    commit: int = 0,
    seed: int = 0,
    **config_fields: object,
) -> tuple[RawNode, MemoryStorage]:
    """A node whose stored log has one entry per item of ``log_terms`` (its term), from 1."""
    storage = MemoryStorage(ConfState(voters=tuple(sorted(voters)), learners=tuple(learners)))
    storage.append([Entry(i, t, data=b"e%d" % i) for i, t in enumerate(log_terms, start=1)])
    storage.set_hard_state(HardState(term=term, vote=vote, commit=commit))
    config = Config(node_id=node_id, **config_fields)  # type: ignore[arg-type]
    return RawNode(config, storage, random.Random(seed)), storage


def drain(node: RawNode, storage: MemoryStorage) -> Ready:
    """Run one Ready (if any) through persist -> advance; returns it (empty if none)."""
    if not node.has_ready():
        return Ready()
    ready = node.ready()
    storage.persist(ready)
    node.advance(ready)
    return ready


def drain_all(node: RawNode, storage: MemoryStorage) -> list[Message]:
    """Drain until no Ready is left; all messages produced, in order."""
    messages: list[Message] = []
    for _ in range(20):
        if not node.has_ready():
            return messages
        messages.extend(drain(node, storage).messages)
    raise AssertionError("Ready never settled")


def message(
    message_type: MessageType, source: NodeId, target: NodeId, term: int, **fields: object
) -> Message:
    return Message(type=message_type, source=source, target=target, term=term, **fields)  # type: ignore[arg-type]


def of_type(messages: Iterable[Message], message_type: MessageType) -> list[Message]:
    return [m for m in messages if m.type == message_type]


def make_leader(node: RawNode, storage: MemoryStorage) -> list[Message]:
    """Campaign and win with votes granted by every other voter; returns the messages the
    new leader sent (its initial APPENDs)."""
    node.campaign()
    messages = drain_all(node, storage)
    for _ in range(2):  # pre-vote round, then the real one
        requests = [m for m in messages if m.type in (MessageType.PRE_VOTE, MessageType.VOTE)]
        if not requests:
            break
        messages = []
        for request in requests:
            response_type = (
                MessageType.PRE_VOTE_RESP
                if request.type == MessageType.PRE_VOTE
                else MessageType.VOTE_RESP
            )
            node.step(message(response_type, request.target, request.source, request.term))
        messages = drain_all(node, storage)
    return messages


def restart(storage: MemoryStorage, node_id: NodeId = "a", **config_fields: object) -> RawNode:
    """A new RawNode on an existing storage: what a crash and restart leaves."""
    config = Config(node_id=node_id, **config_fields)  # type: ignore[arg-type]
    return RawNode(config, storage, random.Random(1))


def log_terms(storage: MemoryStorage) -> list[int]:
    return [storage.term(i) for i in range(storage.first_index(), storage.last_index() + 1)]
