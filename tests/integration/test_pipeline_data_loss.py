"""``failOnDataLoss`` against real retention loss: a cluster whose members roll small segments
and delete them as soon as they can, then a batch read that starts below the first live
offset. With failOnDataLoss=true the query fails with a message naming the queue and the lost
offsets; with false the rows that still exist are returned, each once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftlog.client import Admin, OutgoingMessage, Producer
from raftlog.testing.local_cluster import LocalCluster

pytestmark = pytest.mark.integration
TOPIC = "retained"
SEGMENT_SIZE_BYTES = 64 << 10
BODY_BYTES = 1000
BATCHES = 20  # ~400 KB: several 64 KiB segments, the old ones deleted by retention
MESSAGES_PER_BATCH = 20
RETENTION_WAIT_S = 60.0


@pytest.fixture
def retaining_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    running = LocalCluster(
        str(tmp_path / "data"),
        base_port=0,
        durability="write",
        extra_args=(
            "--segment-size-bytes",
            str(SEGMENT_SIZE_BYTES),
            "--max-body-bytes",
            str(16 << 10),
            "--file-reserved-hours",
            "0",
            "--disk-clean-watermark-ratio",
            "0.0001",
        ),
    )
    running.start(wait_timeout_s=60)
    try:
        yield running
    finally:
        running.stop()


def _first_live_offset(servers: str) -> tuple[int, int]:
    """(first live offset, end offset) of queue 0, once retention has deleted some and the
    bound has held still for a moment (no segment rolls once producing stopped)."""
    deadline = time.monotonic() + RETENTION_WAIT_S
    seen = -1
    with Admin(servers) as admin:
        while time.monotonic() < deadline:
            queue = admin.describe_topic(TOPIC).queues[0]
            if queue.min_queue_offset > 0 and queue.min_queue_offset == seen:
                return queue.min_queue_offset, queue.max_queue_offset
            seen = queue.min_queue_offset
            time.sleep(1.0)
    raise AssertionError(f"retention deleted nothing of {TOPIC} within {RETENTION_WAIT_S} s")


def _read(spark: Any, servers: str, fail_on_data_loss: bool) -> list[Any]:
    return (
        spark.read.format("raftlog")
        .option("servers", servers)
        .option("topic", TOPIC)
        .option("startingOffsets", json.dumps({TOPIC: {"0": 0}}))
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
        .load()
        .collect()
    )


def test_a_read_below_the_first_live_offset_fails_or_skips(
    spark: Any, retaining_cluster: LocalCluster
) -> None:
    servers = ",".join(retaining_cluster.addresses)
    with Admin(servers) as admin:
        admin.create_topic(TOPIC, 1)
    with Producer(servers) as producer:
        for batch in range(BATCHES):
            producer.send_batch(
                TOPIC,
                [
                    OutgoingMessage(b"%d-%d-" % (batch, i) + b"x" * BODY_BYTES, queue_id=0)
                    for i in range(MESSAGES_PER_BATCH)
                ],
            )
    first_live, end = _first_live_offset(servers)

    with pytest.raises(Exception) as failure:
        _read(spark, servers, fail_on_data_loss=True)
    message = str(failure.value)
    assert f"data loss: {TOPIC} queue 0 offsets 0..{first_live - 1}" in message, message
    assert "failOnDataLoss=false" in message

    rows = _read(spark, servers, fail_on_data_loss=False)
    offsets = sorted(r.queue_offset for r in rows)
    # Retention may go on deleting while the read plans: what is returned is the live tail.
    assert offsets == list(range(offsets[0], end)) and offsets[0] >= first_live
    for row in rows:
        batch, i = divmod(row.queue_offset, MESSAGES_PER_BATCH)
        assert bytes(row.value) == b"%d-%d-" % (batch, i) + b"x" * BODY_BYTES
