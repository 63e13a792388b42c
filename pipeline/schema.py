"""The source's row schema, once for Spark and once for Arrow, field for field the same.

Rules this module keeps: the Arrow types are exactly the ones Spark expects for the Spark
types (int32 for IntegerType, int64 for LongType, ``timestamp[us, tz=UTC]`` for TimestampType,
a map whose keys are not null): Spark refuses an Arrow batch whose types differ even slightly.
The column names follow the Kafka source where one exists (key, value, topic, timestamp) and
raftlog's names elsewhere (queue_id, queue_offset, msg_id).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SPARK_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("queue_id", IntegerType(), True),
        StructField("queue_offset", LongType(), True),
        # The producer's clock (born timestamp).
        StructField("timestamp", TimestampType(), True),
        StructField("tags", StringType(), True),
        StructField("properties", MapType(StringType(), StringType(), True), True),
        StructField("msg_id", StringType(), True),
        # The leader's clock when it stored the message (the ConsumeQueue's time search key).
        StructField("store_timestamp", TimestampType(), True),
    ]
)

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
PROPERTIES_TYPE = pa.map_(pa.string(), pa.string())

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("queue_id", pa.int32()),
        pa.field("queue_offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP_TYPE),
        pa.field("tags", pa.string()),
        pa.field("properties", PROPERTIES_TYPE),
        pa.field("msg_id", pa.string()),
        pa.field("store_timestamp", TIMESTAMP_TYPE),
    ]
)

# The sink's columns: value is required, the others optional.
SINK_COLUMNS = ("value", "key", "tags", "properties", "topic", "queue_id")
