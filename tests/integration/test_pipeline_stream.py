"""The raftlog Spark source as a stream into Parquet, against a live three-node cluster: a
query stopped and restarted from its checkpoint resumes exactly (no loss, no duplicate);
a query across a SIGKILL of the leader loses and duplicates nothing; maxOffsetsPerTrigger
caps each micro-batch; a stream written back through the sink stores each row once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raftlog.client import Admin, Producer
from raftlog.testing.local_cluster import LocalCluster

pytestmark = pytest.mark.integration
QUEUES = 3


def produce(servers: str, topic: str, first: int, count: int) -> None:
    with Producer(servers, timeout_s=60) as producer:
        for start in range(first, first + count, 100):
            producer.send_batch(
                topic, [b"m-%d" % i for i in range(start, min(first + count, start + 100))]
            )


def start_query(spark: Any, servers: str, topic: str, tmp: Path, **options: str) -> Any:
    reader = (
        spark.readStream.format("raftlog")
        .option("servers", servers)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return (
        reader.load()
        .select("queue_id", "queue_offset", "value")
        .writeStream.format("parquet")
        .option("path", str(tmp / "out"))
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )


def parquet_rows(spark: Any, tmp: Path) -> list[tuple[int, int, bytes]]:
    return [
        (r.queue_id, r.queue_offset, bytes(r.value))
        for r in spark.read.parquet(str(tmp / "out")).collect()
    ]


def assert_exactly(rows: list[tuple[int, int, bytes]], count: int) -> None:
    places = [(q, o) for q, o, _ in rows]
    assert len(places) == len(set(places)), "a message was written twice"
    assert sorted(v for _, _, v in rows) == sorted(b"m-%d" % i for i in range(count))


def test_a_restarted_query_resumes_exactly(
    spark: Any, servers: str, topic_name: str, tmp_path: Path
) -> None:
    with Admin(servers) as admin:
        admin.create_topic(topic_name, QUEUES)
    produce(servers, topic_name, 0, 300)
    query = start_query(spark, servers, topic_name, tmp_path)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    produce(servers, topic_name, 300, 300)
    query = start_query(spark, servers, topic_name, tmp_path)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert_exactly(parquet_rows(spark, tmp_path), 600)


def test_max_offsets_per_trigger_caps_each_micro_batch(
    spark: Any, servers: str, topic_name: str, tmp_path: Path
) -> None:
    with Admin(servers) as admin:
        admin.create_topic(topic_name, QUEUES)
    produce(servers, topic_name, 0, 400)
    query = start_query(spark, servers, topic_name, tmp_path, maxOffsetsPerTrigger="150")
    try:
        query.processAllAvailable()
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert sizes and max(sizes) <= 150 and sum(sizes) == 400
    assert_exactly(parquet_rows(spark, tmp_path), 400)


def test_a_stream_across_a_leader_sigkill_loses_and_duplicates_nothing(
    spark: Any, pipeline_cluster: LocalCluster, servers: str, topic_name: str, tmp_path: Path
) -> None:
    with Admin(servers) as admin:
        admin.create_topic(topic_name, QUEUES)
    produce(servers, topic_name, 0, 300)
    query = start_query(spark, servers, topic_name, tmp_path)
    killed = None
    try:
        query.processAllAvailable()
        leader = pipeline_cluster.leader_address(timeout_s=5)
        killed = next(n for n, node in pipeline_cluster.nodes.items() if node.address == leader)
        pipeline_cluster.kill(killed)
        produce(servers, topic_name, 300, 300)  # the producer retries to the new leader
        query.processAllAvailable()
    finally:
        query.stop()
        if killed is not None:
            pipeline_cluster.restart(killed)
    assert_exactly(parquet_rows(spark, tmp_path), 600)
