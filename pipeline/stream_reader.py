"""The streaming reader (``spark.readStream.format("raftlog")``): offsets are per-queue JSON
dicts ``{"topic": {"0": 23}}`` (the NEXT offset to read), kept in Spark's checkpoint.

Rules this module keeps:
- Spark's checkpoint, not raftlog, decides where a restarted query resumes: a micro-batch
  reads exactly ``[start, end)`` of each queue, so a re-run batch reads the same rows.
- ``initialOffset`` follows ``startingOffsets`` / ``startingTimestamp`` (default latest);
  a queue a topic gained later starts at its first live offset.
- ``latestOffset(start, limit)`` caps the batch at ``maxOffsetsPerTrigger`` offsets in all,
  shared among the queues in proportion to what each has waiting: with Spark's ReadMaxRows
  limit (4.2+) when it passes one, with the option itself when it passes none (4.0/4.1),
  and not at all for ReadAllAvailable (Trigger.AvailableNow asks for everything).
- Data loss is checked per micro-batch as in the batch reader.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from raftlog.client import Admin
from raftlog.pipeline.options import ReadOptions
from raftlog.pipeline.queue_ranges import (
    ClusterView,
    QueueBounds,
    QueueRange,
    resolve,
    skip_lost,
    split,
)
from raftlog.pipeline.range_reader import read_range

LOG = logging.getLogger(__name__)
StreamOffset = dict[str, dict[str, int]]


def _row_limit(limit: Any, option: int | None) -> int | None:
    """The most offsets this micro-batch may take (None: no cap)."""
    if limit is None:
        return option
    max_rows = getattr(limit, "max_rows", None)
    if max_rows is not None:
        return int(max_rows)
    return None  # ReadAllAvailable, or a limit kind we do not apply


def cap(start: StreamOffset, latest: StreamOffset, max_offsets: int) -> StreamOffset:
    """``latest`` moved back so at most ``max_offsets`` offsets lie past ``start``, shared in
    proportion to each queue's backlog (at least one offset when anything waits)."""
    backlog = {
        (topic, queue): end - start.get(topic, {}).get(queue, end)
        for topic, queues in latest.items()
        for queue, end in queues.items()
    }
    total = sum(max(0, b) for b in backlog.values())
    if total <= max_offsets:
        return latest
    capped: StreamOffset = {}
    given = 0
    for (topic, queue), waiting in backlog.items():
        share = max(0, waiting * max_offsets // total) if waiting > 0 else 0
        given += share
        capped.setdefault(topic, {})[queue] = latest[topic][queue] - max(0, waiting) + share
    if given == 0:
        # Rounding gave every queue nothing: the biggest backlog gets one offset.
        topic, queue = max(backlog, key=lambda k: backlog[k])
        capped[topic][queue] += 1
    return capped


class RaftlogStreamReader(DataSourceStreamReader):
    """Micro-batches of the topics ``options`` name."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def _bounds(self, admin: Admin) -> dict[str, dict[int, QueueBounds]]:
        view = ClusterView(admin)
        return {topic: view.bounds(topic) for topic in self.options.topics}

    def _admin(self) -> Admin:
        return Admin(self.options.servers, timeout_s=self.options.timeout_s)

    def initialOffset(self) -> StreamOffset:
        offsets: StreamOffset = {}
        with self._admin() as admin:
            view = ClusterView(admin)
            for topic, queues in self._bounds(admin).items():
                for queue_id, bounds in sorted(queues.items()):
                    if self.options.starting_timestamp_ms is not None:
                        offset = view.offset_at(topic, queue_id, self.options.starting_timestamp_ms)
                    else:
                        offset = resolve(self.options.starting, topic, queue_id, bounds)
                    offsets.setdefault(topic, {})[str(queue_id)] = offset
        return offsets

    def getDefaultReadLimit(self) -> Any:  # Spark 4.2+
        """``maxOffsetsPerTrigger`` as Spark's ReadMaxRows, so Spark passes it back."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def latestOffset(self, start: StreamOffset | None = None, limit: Any = None) -> StreamOffset:
        with self._admin() as admin:
            latest: StreamOffset = {
                topic: {str(q): b.max for q, b in sorted(queues.items())}
                for topic, queues in self._bounds(admin).items()
            }
        max_offsets = _row_limit(limit, self.options.max_offsets_per_trigger)
        if start is None or max_offsets is None:
            return latest
        return cap(start, latest, max_offsets)

    def partitions(self, start: StreamOffset, end: StreamOffset) -> Sequence[QueueRange]:
        ranges: list[QueueRange] = []
        lost = 0
        with self._admin() as admin:
            bounds = self._bounds(admin)
        for topic, queues in end.items():
            for queue_text, end_offset in queues.items():
                queue_id = int(queue_text)
                queue_bounds = bounds.get(topic, {}).get(queue_id, QueueBounds(0, end_offset))
                first = start.get(topic, {}).get(queue_text, queue_bounds.min)
                if first >= end_offset:
                    continue
                first, skipped = skip_lost(
                    topic, queue_id, first, queue_bounds, self.options.fail_on_data_loss
                )
                lost += skipped
                if first < end_offset:
                    ranges.append(QueueRange(topic, queue_id, first, end_offset))
        if lost:
            LOG.warning("failOnDataLoss=false: skipped %d offsets removed by retention", lost)
        return split(ranges, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        return read_range(
            self.options.servers,
            partition,
            fail_on_data_loss=self.options.fail_on_data_loss,
            timeout_s=self.options.timeout_s,
        )

    def commit(self, end: StreamOffset) -> None:
        """Nothing to do: the position lives in Spark's checkpoint, not in raftlog."""
