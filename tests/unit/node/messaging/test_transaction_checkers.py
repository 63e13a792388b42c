"""The registry of check-back streams: a check goes to one stream of its group that named its
topic, round robin, never past the limits."""

from __future__ import annotations

import pytest

from raftlog.node.errors import OverloadedError
from raftlog.node.messaging.transaction import HalfMessage
from raftlog.node.messaging.transaction_checkers import CheckerRegistry, CheckRequest
from raftlog.store.message import Message
from tests.unit.node.messaging.test_rewrite import record_of

RECORD = record_of(Message("RMQ_SYS_TRANS_HALF_TOPIC", 0, b"x"))


def check(group: str = "g", topic: str = "orders") -> CheckRequest:
    return CheckRequest(RECORD, HalfMessage(0, 0, 0, "TX", group, topic, 0), 1)


def test_a_check_goes_to_one_stream_of_its_group_and_topic_in_turn() -> None:
    registry = CheckerRegistry()
    first = registry.attach("g", "a", ["orders"])
    second = registry.attach("g", "b", ["orders", "refunds"])
    registry.attach("other", "c", ["orders"])
    registry.attach("g", "d", ["refunds"])
    assert registry.live("g", "orders") == 2
    assert registry.offer(check())
    assert registry.offer(check())
    got = [first.get(0.01), second.get(0.01)]
    assert all(g is not None for g in got)
    assert first.get(0.01) is None and second.get(0.01) is None


def test_a_check_nobody_takes_is_refused() -> None:
    registry = CheckerRegistry()
    assert not registry.offer(check())
    stream = registry.attach("g", "a", ["orders"])
    registry.detach(stream)
    assert not registry.offer(check())
    assert registry.live("g", "orders") == 0


def test_streams_are_bounded() -> None:
    registry = CheckerRegistry(max_streams=1)
    registry.attach("g", "a", ["orders"])
    with pytest.raises(OverloadedError, match="limit is 1"):
        registry.attach("g", "b", ["orders"])
