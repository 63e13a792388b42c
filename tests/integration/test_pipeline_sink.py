"""The raftlog Spark sink against a live three-node cluster: rows written are read back
exactly, and a task Spark retries after it already wrote stores nothing twice (the producer
id and sequences derive from the job and partition, so the resends are deduplicated)."""

from __future__ import annotations

from typing import Any

import pytest

from raftlog.client import Admin

pytestmark = pytest.mark.integration


def read_back(spark: Any, servers: str, topic: str) -> list[tuple[Any, ...]]:
    df = spark.read.format("raftlog").option("servers", servers).option("topic", topic).load()
    return sorted(
        (bytes(r.value), r.key, r.tags, tuple(sorted((r.properties or {}).items())), r.queue_id)
        for r in df.collect()
    )


def test_rows_written_are_read_back(spark: Any, servers: str, topic_name: str) -> None:
    from pyspark.sql import functions as F

    with Admin(servers) as admin:
        admin.create_topic(topic_name, 2)
    source = spark.range(0, 1500, numPartitions=3).select(
        F.concat(F.lit("value-"), F.col("id").cast("string")).cast("binary").alias("value"),
        F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
        F.when(F.col("id") % 2 == 0, F.lit("even")).alias("tags"),
        F.create_map(F.lit("id"), F.col("id").cast("string")).alias("properties"),
        (F.col("id") % 2).cast("int").alias("queue_id"),
    )
    source.write.format("raftlog").option("servers", servers).option("topic", topic_name).mode(
        "append"
    ).save()
    expected = sorted(
        (
            b"value-%d" % i,
            b"key-%d" % i,
            "even" if i % 2 == 0 else None,
            (("id", str(i)),),
            i % 2,
        )
        for i in range(1500)
    )
    assert read_back(spark, servers, topic_name) == expected


def test_a_sink_without_a_value_column_or_topic_is_refused(spark: Any, servers: str) -> None:
    with pytest.raises(Exception, match="value"):
        spark.range(3).write.format("raftlog").option("servers", servers).option("topic", "x").mode(
            "append"
        ).save()
    with pytest.raises(Exception, match="topic"):
        spark.range(3).selectExpr("CAST(id AS STRING) AS value").write.format("raftlog").option(
            "servers", servers
        ).mode("append").save()


def test_a_task_retried_after_it_wrote_duplicates_nothing(
    spark: Any, servers: str, topic_name: str
) -> None:
    from pyspark.sql import functions as F

    with Admin(servers) as admin:
        admin.create_topic(topic_name, 2)
    rows_per_partition = 2000
    source = spark.range(0, 2 * rows_per_partition, numPartitions=2).select(
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("value")
    )
    # Each task's first attempt stores two 512-row batches, then fails; Spark (local[2,4])
    # runs it again, which resends those batches under the same producer id and sequences.
    source.write.format("raftlog").option("servers", servers).option("topic", topic_name).option(
        "failFirstAttemptAfterRows", "1024"
    ).mode("append").save()
    values = [row[0] for row in read_back(spark, servers, topic_name)]
    assert len(values) == 2 * rows_per_partition
    assert sorted(values) == sorted(b"row-%d" % i for i in range(2 * rows_per_partition))
