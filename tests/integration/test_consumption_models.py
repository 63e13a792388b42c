"""Issue 18's consumption features through the typed client against a real 3-node cluster:
tag filter expressions (``TagA || TagB``, ``*``; a tag whose CRC32 equals a wanted one never
reaches the caller), broadcast consumption (every member reads every message, each resumes
from its own local offsets) and the push consumer (a listener on a thread pool; what it
consumed is committed, so the group's next consumer starts after it)."""

from __future__ import annotations

import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from raftlog.client import (
    Admin,
    Connection,
    Consumer,
    ConsumeResult,
    Message,
    OutgoingMessage,
    Producer,
    PushConsumer,
)
from raftlog.testing.local_cluster import LocalCluster

pytestmark = pytest.mark.integration

# CRC32("plumless") == CRC32("buckeroo"): the ConsumeQueue's tag hashes collide.
COLLIDING_TAGS = ("plumless", "buckeroo")
TAG_CYCLE = ("TagA", "TagB", "TagC", "", *COLLIDING_TAGS)
WAIT_S = 20.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("consumption-models")
    running = LocalCluster(str(base / "data"), base_port=0, durability="write")
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def connection(cluster: LocalCluster) -> Iterator[Connection]:
    with Connection(cluster.addresses) as shared:
        yield shared


def produce(
    connection: Connection, topic: str, count: int, queue_count: int = 2, first: int = 0
) -> list[bytes]:
    """Messages ``first`` to ``first + count`` over the queues, tagged by TAG_CYCLE; returns
    their bodies."""
    with Admin(connection) as admin:
        admin.create_topic(topic, queue_count)
    bodies = [b"%s-%d" % (topic.encode(), i) for i in range(first, first + count)]
    with Producer(connection) as producer:
        producer.send_batch(
            topic,
            [
                OutgoingMessage(body, tags=TAG_CYCLE[i % len(TAG_CYCLE)], queue_id=i % queue_count)
                for i, body in enumerate(bodies)
            ],
        )
    return bodies


def drain(consumer: Consumer, idle_s: float = 1.0) -> list[Message]:
    return list(consumer.iterate(max_idle_s=idle_s, poll_timeout_s=0.3))


def test_tag_expressions_and_colliding_tags(connection: Connection) -> None:
    produce(connection, "tagged", 60)
    assert zlib.crc32(COLLIDING_TAGS[0].encode()) == zlib.crc32(COLLIDING_TAGS[1].encode())

    def tags_read(expression: str) -> Counter[str]:
        with Consumer(
            connection, "tags", "tagged", tags=expression, from_beginning=True
        ) as consumer:
            return Counter(m.tags for m in drain(consumer))

    assert tags_read("TagA || TagB") == {"TagA": 10, "TagB": 10}
    assert tags_read(" TagC ") == {"TagC": 10}
    # The server selects both by hash; the real tag string keeps the other one out.
    assert tags_read(COLLIDING_TAGS[0]) == {COLLIDING_TAGS[0]: 10}
    assert tags_read(f"{COLLIDING_TAGS[1]} || TagA") == {COLLIDING_TAGS[1]: 10, "TagA": 10}
    assert tags_read("*") == {tag: 10 for tag in TAG_CYCLE}
    assert tags_read("NoSuchTag") == {}
    with pytest.raises(ValueError, match="'\\*' in tag filter"):
        Consumer(connection, "tags", "tagged", tags="TagA || *")


def test_broadcast_members_each_read_everything_and_resume(
    connection: Connection, tmp_path: Path
) -> None:
    bodies = produce(connection, "news", 20)

    def member(client_id: str) -> Consumer:
        return Consumer(
            connection, "screens", "news", broadcast=True, client_id=client_id, offsets_dir=tmp_path
        )

    with member("screen-1") as first, member("screen-2") as second:
        assert sorted(m.body for m in drain(first)) == sorted(bodies)
        assert sorted(m.body for m in drain(second)) == sorted(bodies)
        first.commit()  # screen-2 never commits
    more = produce(connection, "news", 6, first=20)
    with member("screen-1") as first, member("screen-2") as second:
        assert sorted(m.body for m in drain(first)) == sorted(more)  # resumed
        assert len(drain(second)) == 26  # from the start again: it kept no offsets
    # Broadcast offsets are the members' own: the group has none on the cluster.
    with Consumer(connection, "screens", "news") as clustering:
        assert clustering.positions == {0: 0, 1: 0}
    assert (tmp_path / "screen-1" / "screens" / "news.json").is_file()


def test_a_push_consumer_consumes_everything_and_commits_it(connection: Connection) -> None:
    bodies = produce(connection, "pushed", 400, queue_count=4)
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()

    def listener(message: Message) -> ConsumeResult:
        time.sleep(0.001 * (message.queue_offset % 3))  # finish out of order
        with lock:
            seen[message.body] += 1
        return ConsumeResult.CONSUME_SUCCESS

    with PushConsumer(
        connection, group="workers", topic="pushed", listener=listener, consume_thread_count=4
    ):
        deadline = time.monotonic() + WAIT_S
        while len(seen) < len(bodies) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert set(seen) == set(bodies) and max(seen.values()) == 1
    # Shutdown committed everything: the group's next consumer starts at the end.
    with Consumer(connection, "workers", "pushed") as after:
        assert after.positions == {q: 100 for q in range(4)}
        assert after.poll(0.2) == []


def test_a_push_consumer_with_a_tag_filter_in_broadcast_mode(
    connection: Connection, tmp_path: Path
) -> None:
    produce(connection, "alerts", 30)
    seen: dict[str, list[str]] = {"a": [], "b": []}

    def listener_of(client_id: str) -> Callable[[Message], ConsumeResult]:
        def listener(message: Message) -> ConsumeResult:
            seen[client_id].append(message.tags)
            return ConsumeResult.CONSUME_SUCCESS

        return listener

    members = [
        PushConsumer(
            connection,
            group="pagers",
            topic="alerts",
            listener=listener_of(client_id),
            tags="TagA || TagC",
            broadcast=True,
            client_id=client_id,
            offsets_dir=tmp_path,
            consume_thread_count=2,
        ).start()
        for client_id in seen
    ]
    try:
        deadline = time.monotonic() + WAIT_S
        while min(len(tags) for tags in seen.values()) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # nothing more is coming
    finally:
        for member in members:
            member.shutdown()
    for tags in seen.values():
        assert Counter(tags) == {"TagA": 5, "TagC": 5}
