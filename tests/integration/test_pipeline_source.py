"""The raftlog Spark source, batch reads against a live three-node cluster: what is read
equals what was produced, byte for byte; every option narrows as documented; bad options
fail with a message naming them; filter pushdown returns the same rows as no pushdown."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from raftlog.client import Admin, OutgoingMessage, Producer

pytestmark = pytest.mark.integration
QUEUES = 4
# Sent one at a time, 200 messages took about 30 s on a loaded machine; batches take 2-3 s.
PRODUCE_BATCH = 10


def produce(servers: str, topic: str, count: int, *, tagged: bool = False) -> list[Any]:
    """``count`` messages over the queues (binary bodies with every byte value), in batches of
    ``PRODUCE_BATCH`` (each batch a later store time than the one before)."""
    with Admin(servers) as admin:
        admin.create_topic(topic, QUEUES)
    sent = []
    with Producer(servers) as producer:
        for start in range(0, count, PRODUCE_BATCH):
            batch = [
                OutgoingMessage(
                    bytes([i % 256]) * (i % 7) + b"\x00body-%d\xff" % i,
                    keys=(f"k{i}",),
                    tags="even" if tagged and i % 2 == 0 else "odd",
                    queue_id=i % QUEUES,
                    properties={"n": str(i)},
                )
                for i in range(start, min(count, start + PRODUCE_BATCH))
            ]
            sent += producer.send_batch(topic, batch)
    return sent


def load(spark: Any, servers: str, topic: str, **options: Any) -> Any:
    reader = spark.read.format("raftlog").option("servers", servers).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load()


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (r.topic, r.queue_id, r.queue_offset, bytes(r.value), r.key, r.tags) for r in df.collect()
    )


def test_a_batch_read_equals_what_was_produced_byte_for_byte(
    spark: Any, servers: str, topic_name: str
) -> None:
    sent = produce(servers, topic_name, 200)
    read = load(spark, servers, topic_name).collect()
    assert len(read) == 200
    by_place = {(r.queue_id, r.queue_offset): r for r in read}
    for i, result in enumerate(sent):
        row = by_place[(result.queue_id, result.queue_offset)]
        assert bytes(row.value) == bytes([i % 256]) * (i % 7) + b"\x00body-%d\xff" % i
        assert row.key == f"k{i}".encode() and row.msg_id == result.msg_id
        assert row.properties == {"n": str(i)} and row.topic == topic_name
        assert row.store_timestamp is not None and row.timestamp is not None


def test_offsets_json_timestamps_and_min_partitions(
    spark: Any, servers: str, topic_name: str
) -> None:
    produce(servers, topic_name, 40)  # 10 per queue
    starting = json.dumps({topic_name: {"0": 3, "1": -2}})
    ending = json.dumps({topic_name: {"0": 5, "2": 4}})
    df = load(spark, servers, topic_name, startingOffsets=starting, endingOffsets=ending)
    got = {(r[1], r[2]) for r in rows(df)}
    expected = {(0, 3), (0, 4)} | {(1, o) for o in range(10)}
    expected |= {(2, o) for o in range(4)} | {(3, o) for o in range(10)}
    assert got == expected
    assert load(spark, servers, topic_name, startingOffsets="latest").count() == 0
    split = load(spark, servers, topic_name, minPartitions=10)
    assert split.rdd.getNumPartitions() >= 10 and split.count() == 40

    cut_ms = int(time.time() * 1000) + 5
    time.sleep(0.05)
    produce(servers, topic_name, 8)
    after = load(spark, servers, topic_name, startingTimestamp=cut_ms)
    assert after.count() == 8
    before = load(spark, servers, topic_name, endingTimestamp=cut_ms)
    assert before.count() == 40


def test_several_topics_in_one_read(spark: Any, servers: str, topic_name: str) -> None:
    produce(servers, topic_name + "a", 12)
    produce(servers, topic_name + "b", 8)
    df = load(spark, servers, f"{topic_name}a,{topic_name}b")
    counts = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert counts == {topic_name + "a": 12, topic_name + "b": 8}


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"servers": ""}, "servers"),
        ({"topic": ""}, "topic"),
        ({"startingOffsets": "{not json"}, "startingOffsets"),
        ({"startingOffsets": '{"other": {"0": 1}}'}, "startingOffsets"),
        ({"endingOffsets": "earliest"}, "endingOffsets"),
        ({"minPartitions": "many"}, "minPartitions"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"topic": "no_such_topic_here"}, "no_such_topic_here"),
    ],
)
def test_bad_options_fail_with_a_message_naming_them(
    spark: Any, servers: str, topic_name: str, options: dict[str, str], names: str
) -> None:
    produce(servers, topic_name, 1)
    reader = spark.read.format("raftlog").option("servers", servers).option("topic", topic_name)
    for name, value in options.items():
        reader = reader.option(name, value)
    with pytest.raises(Exception) as caught:
        reader.load().collect()
    assert names in str(caught.value)
    assert "StatusCode" not in str(caught.value).split("Traceback")[0]


def test_pushdown_returns_the_same_rows_as_no_pushdown(
    spark: Any, servers: str, topic_name: str
) -> None:
    sent = produce(servers, topic_name, 120, tagged=True)
    middle_ms = sent[60].store_timestamp_ms
    queries = [
        "tags = 'even'",
        "tags IN ('odd')",
        "key = CAST('k17' AS BINARY)",
        f"store_timestamp >= timestamp_millis({middle_ms})",
        f"store_timestamp < timestamp_millis({middle_ms}) AND tags = 'odd'",
    ]
    for query in queries:
        # A fresh DataFrame per query: Spark reuses a pushed-down reader within one.
        plain = rows(load(spark, servers, topic_name).filter(query))
        pushed = rows(load(spark, servers, topic_name, pushdown="true").filter(query))
        assert pushed == plain and plain, query
