"""Queue ranges: what a read covers, as (topic, queue id, start, end) offset ranges, resolved
against the cluster on the driver.

Rules this module keeps:
- A range is half-open, ``[start, end)`` in queue offsets; it is an InputPartition, so one
  range is one Spark task (``split`` cuts big ones for ``minPartitions``).
- Ends come from the queues' max offsets (committed and dispatched, so every member will
  serve them); a timestamp resolves through the ConsumeQueue time search (QueryOffsetByTime:
  the first offset stored at or after it).
- Data loss (a start below the queue's first live offset, removed by retention) fails with a
  message naming the queue and the offsets when ``failOnDataLoss`` is true; otherwise the range
  starts at the first live offset and the skipped count is returned, to be logged.
- An unknown topic is an OptionError naming it, not a gRPC NOT_FOUND.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from raftlog.client import Admin, NotFoundError
from raftlog.pipeline.options import EARLIEST, LATEST, OffsetSpec, OptionError, ReadOptions


class DataLossError(RuntimeError):
    """Requested messages were removed by retention and ``failOnDataLoss`` is true."""


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """Queue offsets ``[start, end)`` of one topic's queue: one Spark input partition."""

    topic: str
    queue_id: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True, slots=True)
class QueueBounds:
    """One queue's live offsets: ``min`` the first, ``max`` one past the last."""

    min: int
    max: int


class ClusterView:
    """The driver's questions to the cluster about queues (bounds, offsets by time)."""

    def __init__(self, admin: Admin) -> None:
        self._admin = admin

    def bounds(self, topic: str) -> dict[int, QueueBounds]:
        """Queue id -> bounds, for every queue of ``topic``, as the leader sees them (a
        follower may not have applied the newest writes yet: planned from it, a read right
        after a produce would miss them)."""
        leader = self._admin.cluster_status().leader_address or None
        try:
            description = self._admin.describe_topic(topic, address=leader)
        except NotFoundError:
            raise OptionError(f"option 'topic': topic {topic!r} does not exist") from None
        bounds = {
            q.queue_id: QueueBounds(q.min_queue_offset, q.max_queue_offset)
            for q in description.queues
        }
        for queue_id in range(description.topic.queue_count):
            bounds.setdefault(queue_id, QueueBounds(0, 0))
        return bounds

    def offset_at(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset of the queue stored at or after ``timestamp_ms``."""
        return self._admin.query_by_time(topic, queue_id, timestamp_ms)


def resolve(spec: OffsetSpec, topic: str, queue_id: int, bounds: QueueBounds) -> int:
    """An offset option's value for one queue, as a queue offset."""
    offset = spec.offset_for(topic, queue_id)
    if offset == EARLIEST:
        return bounds.min
    if offset == LATEST:
        return bounds.max
    return offset


def skip_lost(
    topic: str, queue_id: int, start: int, bounds: QueueBounds, fail_on_data_loss: bool
) -> tuple[int, int]:
    """(the start to read from, how many requested offsets retention removed)."""
    if start >= bounds.min:
        return start, 0
    if fail_on_data_loss:
        raise DataLossError(
            f"data loss: {topic} queue {queue_id} offsets {start}..{bounds.min - 1} were removed "
            f"by retention (the first live offset is {bounds.min}); set failOnDataLoss=false "
            "to skip them"
        )
    return bounds.min, bounds.min - start


def batch_ranges(options: ReadOptions, view: ClusterView) -> tuple[list[QueueRange], int]:
    """Every queue's range for a batch read, and the count of offsets skipped as lost."""
    ranges: list[QueueRange] = []
    lost = 0
    for topic in options.topics:
        for queue_id, bounds in sorted(view.bounds(topic).items()):
            start = resolve(options.starting, topic, queue_id, bounds)
            end = min(resolve(options.ending, topic, queue_id, bounds), bounds.max)
            if options.starting_timestamp_ms is not None:
                start = view.offset_at(topic, queue_id, options.starting_timestamp_ms)
            if options.ending_timestamp_ms is not None:
                end = min(end, view.offset_at(topic, queue_id, options.ending_timestamp_ms))
            if start >= end:
                continue
            start, skipped = skip_lost(topic, queue_id, start, bounds, options.fail_on_data_loss)
            lost += skipped
            if start < end:
                ranges.append(QueueRange(topic, queue_id, start, end))
    return ranges, lost


def split(ranges: list[QueueRange], min_partitions: int) -> list[QueueRange]:
    """Cut the ranges so there are at least ``min_partitions`` (when there are that many
    offsets), each range into pieces in proportion to its size, as Kafka's source does."""
    total = sum(r.size for r in ranges)
    if min_partitions <= len(ranges) or total == 0:
        return ranges
    pieces: list[QueueRange] = []
    for queue_range in ranges:
        count = min(queue_range.size, max(1, math.ceil(queue_range.size * min_partitions / total)))
        step = math.ceil(queue_range.size / count)
        for start in range(queue_range.start, queue_range.end, step):
            pieces.append(
                QueueRange(
                    queue_range.topic,
                    queue_range.queue_id,
                    start,
                    min(start + step, queue_range.end),
                )
            )
    return pieces
