"""Tag filter expressions (client/tag_filter.py): RocketMQ's ``TagA || TagB`` and ``*``, a
clear ValueError for a malformed one before any call, and the client-side re-check of the
real tag (a server that filtered by hash alone hands over a colliding tag's message)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from raftlog.client import Consumer, TagFilter
from raftlog.proto import client_pb2
from tests.unit.client.fake_server import FakeServer

# Two tags with one CRC32 (the ConsumeQueue's tag hash, store/hashing.py).
WANTED, COLLIDING = "plumless", "buckeroo"


@pytest.mark.parametrize(
    ("expression", "tags"),
    [
        ("*", None),
        ("", None),
        ("  *  ", None),
        ([], None),
        (["*"], None),
        ("TagA", {"TagA"}),
        ("TagA || TagB", {"TagA", "TagB"}),
        ("TagA||TagB||TagA", {"TagA", "TagB"}),
        ("  TagA ||\tTagB  ", {"TagA", "TagB"}),
        (["TagA", "TagB"], {"TagA", "TagB"}),
        (("x-1", "%y_2"), {"x-1", "%y_2"}),
        ("Étiquette || 标签", {"Étiquette", "标签"}),
    ],
)
def test_expressions_parse_as_rocketmq_reads_them(
    expression: str | list[str], tags: set[str] | None
) -> None:
    parsed = TagFilter.parse(expression)
    assert parsed.tags == (None if tags is None else frozenset(tags))
    assert parsed.matches_all is (tags is None)
    assert parsed.pull_tags == sorted(tags or ())


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("TagA ||", "empty tag"),
        ("|| TagA", "empty tag"),
        ("TagA |||| TagB", "empty tag"),
        ("||", "empty tag"),
        (["TagA", ""], "empty tag"),
        ("TagA || *", "stands alone"),
        (["*", "TagA"], "stands alone"),
        ("TagA | TagB", "holds '|' or whitespace"),
        ("TagA && TagB", "holds '|' or whitespace"),
        ("Tag A", "holds '|' or whitespace"),
        ("TagA ||| TagB", "holds '|' or whitespace"),
        ("Tag\x01A", "\\\\x01"),
    ],
)
def test_malformed_expressions_are_refused(expression: str | list[str], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        TagFilter.parse(expression)


def test_wrong_types_are_refused() -> None:
    with pytest.raises(TypeError):
        TagFilter.parse(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TagFilter.parse([b"TagA"])  # type: ignore[list-item]


def test_the_canonical_expression_and_matching() -> None:
    parsed = TagFilter.parse("b || a")
    assert parsed.expression == "a || b"
    assert TagFilter.parse(parsed.expression) == parsed
    assert parsed.matches("a") and not parsed.matches("c") and not parsed.matches("")
    assert TagFilter.parse("*").expression == "*"
    assert TagFilter.parse("*").matches("")


def test_a_malformed_expression_fails_before_any_call() -> None:
    # Nothing listens on this address: the ValueError comes before a connection is tried.
    with pytest.raises(ValueError, match="empty tag"):
        Consumer("127.0.0.1:1", "g", "t", tags="TagA ||")


def test_the_two_test_tags_collide() -> None:
    assert WANTED != COLLIDING
    assert zlib.crc32(WANTED.encode()) == zlib.crc32(COLLIDING.encode())


@pytest.fixture
def hash_only_server() -> Iterator[FakeServer]:
    """A server that filters by tag hash only (as the ConsumeQueue does): it returns every
    message whose tag's CRC32 is wanted, colliding ones included."""
    fake = FakeServer().start()
    stored = [(WANTED, b"w0"), (COLLIDING, b"c1"), ("other", b"o2"), (WANTED, b"w3")]

    def describe(request: Any, context: Any) -> Any:
        return client_pb2.DescribeTopicResponse(
            topic=client_pb2.TopicInfo(name=request.topic, queue_count=1),
            queues=[
                client_pb2.QueueInfo(queue_id=0, min_queue_offset=0, max_queue_offset=len(stored))
            ],
        )

    def pull(request: Any, context: Any) -> Any:
        wanted = {zlib.crc32(tag.encode()) for tag in request.tags}
        chosen = [
            client_pb2.StoredMessage(topic=request.topic, queue_offset=i, tags=tag, body=body)
            for i, (tag, body) in enumerate(stored)
            if i >= request.queue_offset and (not wanted or zlib.crc32(tag.encode()) in wanted)
        ]
        status = client_pb2.PULL_STATUS_FOUND if chosen else client_pb2.PULL_STATUS_NO_NEW_MESSAGES
        return client_pb2.PullResponse(
            status=status,
            messages=chosen,
            next_queue_offset=len(stored),
            max_queue_offset=len(stored),
        )

    fake.hooks.update(DescribeTopic=describe, Pull=pull)
    yield fake
    fake.stop()


def test_the_client_drops_a_colliding_tag_the_server_let_through(
    hash_only_server: FakeServer,
) -> None:
    with Consumer(
        [hash_only_server.address], "g", "t", tags=WANTED, from_beginning=True
    ) as consumer:
        messages = consumer.poll(0.05)
        assert [m.body for m in messages] == [b"w0", b"w3"]
        assert consumer.positions == {0: 4}  # past the dropped one: it is never asked again
    with Consumer([hash_only_server.address], "g", "t", from_beginning=True) as everything:
        assert len(everything.poll(0.05)) == 4
