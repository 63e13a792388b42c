"""Retention: delete old CommitLog segments, then the ConsumeQueue and index files below the
CommitLog's new first offset; refuse writes when the disk is full.

Rules this module keeps (docs/store-format.md, RocketMQ's defaults):
- A segment is expired when its newest record's store time is older than ``retention_hours``
  (``SegmentInfo.last_modified_ms``, taken from the data, so it survives copies). Expired
  segments are deleted during the daily ``delete_hour_utc``, or at any time once disk use is
  above ``disk_clean_watermark_ratio``.
- Above ``disk_force_clean_ratio`` even unexpired segments go, oldest first, until use drops
  back below that ratio.
- The active (last) segment is never deleted, and at most ``max_segments_per_run`` segments
  go per run, so one run's I/O is bounded.
- Segments are deleted oldest first only: the CommitLog stays one contiguous range.
- ``is_disk_full`` is true above ``disk_full_ratio``; the store refuses writes then, and
  accepts them again as soon as use drops (no latch).
- The clock is injected (``now_ms``) so tests control expiry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from raftlog.store.commit_log import CommitLog
from raftlog.store.config import StoreConfig
from raftlog.store.consume_queue import ConsumeQueue
from raftlog.store.filesystem import FileSystem
from raftlog.store.index_file import IndexService
from raftlog.store.segment import SegmentInfo

_MS_PER_HOUR = 3_600_000
_HOURS_PER_DAY = 24
DEFAULT_DELETE_HOUR_UTC = 4
DEFAULT_MAX_SEGMENTS_PER_RUN = 10


@dataclass(frozen=True, slots=True)
class RetentionReport:
    deleted_segments: int
    deleted_consume_queue_files: int
    deleted_index_files: int


class Retention:
    def __init__(
        self,
        fs: FileSystem,
        config: StoreConfig,
        commit_log: CommitLog,
        consume_queues: Callable[[], Iterable[ConsumeQueue]],
        index: IndexService,
        now_ms: Callable[[], int],
        delete_hour_utc: int = DEFAULT_DELETE_HOUR_UTC,
        max_segments_per_run: int = DEFAULT_MAX_SEGMENTS_PER_RUN,
    ) -> None:
        assert 0 <= delete_hour_utc < _HOURS_PER_DAY and max_segments_per_run >= 1
        self._fs = fs
        self._config = config
        self._commit_log = commit_log
        self._consume_queues = consume_queues
        self._index = index
        self._now_ms = now_ms
        self._delete_hour_utc = delete_hour_utc
        self._max_segments_per_run = max_segments_per_run

    def disk_usage_ratio(self) -> float:
        return self._fs.disk_usage_ratio(self._config.root_dir)

    def is_disk_full(self) -> bool:
        return self.disk_usage_ratio() > self._config.disk_full_ratio

    def run(self, max_deleted_end_offset: int | None = None) -> RetentionReport:
        """One retention pass; returns what it deleted. ``max_deleted_end_offset``: no segment
        ending past it is deleted (a Raft node passes the end of its compacted log)."""
        deleted_segments = self._delete_segments(max_deleted_end_offset)
        if not deleted_segments:
            return RetentionReport(0, 0, 0)
        min_physical_offset = self._commit_log.min_offset
        deleted_units = sum(
            queue.delete_files_below(min_physical_offset) for queue in self._consume_queues()
        )
        deleted_index_files = self._index.delete_files_below(min_physical_offset)
        return RetentionReport(deleted_segments, deleted_units, deleted_index_files)

    def deletable_end_offset(self) -> int:
        """Where the segments a pass would delete now end (``min_offset`` when none): a Raft
        node compacts its log up to there first. Disk pressure counts one segment."""
        now_ms = self._now_ms()
        may_delete_expired = self._may_delete_expired(now_ms)
        segments = self._commit_log.segments()[:-1][: self._max_segments_per_run]
        end = self._commit_log.min_offset
        for index, segment in enumerate(segments):
            forced = index == 0 and self._forced()
            if not (forced or (self._expired(segment, now_ms) and may_delete_expired)):
                break
            end = segment.start_offset + self._commit_log.segment_size_bytes
        return end

    def _may_delete_expired(self, now_ms: int) -> bool:
        in_delete_hour = (now_ms // _MS_PER_HOUR) % _HOURS_PER_DAY == self._delete_hour_utc
        return in_delete_hour or self.disk_usage_ratio() > self._config.disk_clean_watermark_ratio

    def _expired(self, segment: SegmentInfo, now_ms: int) -> bool:
        # A segment without records holds nothing to keep.
        last_modified_ms = segment.last_modified_ms
        retention_ms = self._config.retention_hours * _MS_PER_HOUR
        return last_modified_ms is None or now_ms - last_modified_ms >= retention_ms

    def _forced(self) -> bool:
        return self.disk_usage_ratio() > self._config.disk_force_clean_ratio

    def _delete_segments(self, max_deleted_end_offset: int | None) -> int:
        now_ms = self._now_ms()
        # Decided once per run: a run that starts cleaning expired segments finishes them.
        may_delete_expired = self._may_delete_expired(now_ms)
        segment_size_bytes = self._commit_log.segment_size_bytes
        deleted = 0
        while deleted < self._max_segments_per_run:
            segments = self._commit_log.segments()
            if len(segments) <= 1:
                break  # never the active segment
            oldest = segments[0]
            if (
                max_deleted_end_offset is not None
                and oldest.start_offset + segment_size_bytes > max_deleted_end_offset
            ):
                break
            if not (self._forced() or (self._expired(oldest, now_ms) and may_delete_expired)):
                break
            self._commit_log.delete_segment(oldest.start_offset)
            deleted += 1
        return deleted
