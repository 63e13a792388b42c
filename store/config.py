"""Store configuration: one validated dataclass, RocketMQ's defaults where they make sense.

Rules this module keeps:
- Every size and time carries its unit in its name; every field is checked in
  ``__post_init__`` so a bad configuration fails at startup with the field, value and range.
- Defaults are the production ones (1 GiB segments, 300,000-unit ConsumeQueue files, a
  5M-slot/20M-entry IndexFile); tests pass small values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from raftlog.store.commit_log import MIN_SEGMENT_SIZE_BYTES
from raftlog.store.validation import Limits


class FlushMode(enum.Enum):
    """SYNC_FLUSH: a write is acknowledged only after fsync (group commit shares one fsync
    among concurrent writers). ASYNC_FLUSH: a background flusher fsyncs periodically."""

    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


@dataclass(frozen=True, slots=True)
class StoreConfig:
    root_dir: str
    segment_size_bytes: int = 1 << 30
    consume_queue_file_units: int = 300_000
    index_slot_count: int = 5_000_000
    index_entry_count: int = 20_000_000
    flush_mode: FlushMode = FlushMode.SYNC_FLUSH
    flush_interval_ms: int = 500
    # How often (at most) a periodic checkpoint makes ConsumeQueues and the index durable
    # (store/checkpointer.py); a crash restart re-dispatches up to this much of writes.
    consume_queue_flush_interval_ms: int = 10_000
    max_open_segments: int = 64
    limits: Limits = field(default_factory=Limits)
    retention_hours: int = 72
    disk_clean_watermark_ratio: float = 0.75
    disk_force_clean_ratio: float = 0.85
    disk_full_ratio: float = 0.90

    def __post_init__(self) -> None:
        if not self.root_dir:
            raise ValueError("StoreConfig.root_dir is empty")
        if not isinstance(self.flush_mode, FlushMode):
            raise ValueError(f"StoreConfig.flush_mode {self.flush_mode!r} is not a FlushMode")
        minimums = {
            # Not tied to the limits, so tests can use tiny segments: a record larger than a
            # segment is refused when it is written (CommitLog.position_for).
            "segment_size_bytes": MIN_SEGMENT_SIZE_BYTES,
            "consume_queue_file_units": 1,
            "index_slot_count": 1,
            "index_entry_count": 1,
            "flush_interval_ms": 1,
            "consume_queue_flush_interval_ms": 0,
            "max_open_segments": 1,
            "retention_hours": 0,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if not isinstance(value, int) or value < minimum:
                raise ValueError(f"StoreConfig.{name} is {value!r}; it must be at least {minimum}")
        ratios = (
            self.disk_clean_watermark_ratio,
            self.disk_force_clean_ratio,
            self.disk_full_ratio,
        )
        if not 0.0 < ratios[0] <= ratios[1] <= ratios[2] <= 1.0:
            raise ValueError(
                "StoreConfig disk ratios must satisfy 0 < disk_clean_watermark_ratio "
                "<= disk_force_clean_ratio <= disk_full_ratio <= 1, got "
                f"{ratios[0]}, {ratios[1]}, {ratios[2]}"
            )
