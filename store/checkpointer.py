"""The checkpointer: what the store's checkpoint file records, when the periodic checkpoint
also makes the derived data (ConsumeQueues, IndexFile) durable, and how the record is lowered
before data it vouches for is cut.

Why derived data is made durable less often than the CommitLog is flushed: with thousands of
queues, writing and syncing every touched ConsumeQueue each second cost the write path about
a tenth of its throughput (10,000 queues: one open, pwrite and close per queue, then a
syncfs). RocketMQ likewise flushes a ConsumeQueue only every few pages, and all of them on a
longer interval (``flushConsumeQueueThoroughInterval``). The price is on a crash restart: it
re-dispatches from the last derived flush, at most ``consume_queue_flush_interval_ms`` of
writes (at 20 MiB/s of 1 KiB messages, 10 s is 200k records: about 1 s of dispatch).

Rules this module keeps:
- A periodic checkpoint always records the CommitLog's new flushed offset; it records a new
  dispatched offset only after a derived flush, which it runs when the interval has passed
  since the last one, or when dispatch stood still since the previous periodic checkpoint
  (writes paused: the flush is then cheap, and a crash after it redoes nothing). An explicit
  ``MessageStore.checkpoint`` (and a clean close) always flushes derived data.
- The record never vouches for what is not there: before the CommitLog or derived data is cut
  below a recorded offset (a truncation, a replaced log), ``lower`` durably saves a record
  no higher than the cut. Otherwise a crash after the cut would leave the old record, and
  recovery would trust stale ConsumeQueue units below it, or skip verifying new bytes.
- ``lock`` is held across a whole checkpoint and across a cut, so a checkpoint that read the
  dispatched offset before a cut cannot save it after the cut lowered the record. Lock order:
  ``lock``, then the store's write lock, then its dispatch lock.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from raftlog.store.checkpoint import Checkpoint, save_checkpoint
from raftlog.store.filesystem import FileSystem


class Checkpointer:
    """Saves checkpoints for one store. ``recorded``: the checkpoint file as loaded (None when
    missing or damaged: then it vouches for nothing)."""

    def __init__(
        self,
        fs: FileSystem,
        root_dir: str,
        recorded: Checkpoint | None,
        derived_flush_interval_ms: int,
        now_ms: Callable[[], int],
    ) -> None:
        self.lock = threading.Lock()
        self._fs = fs
        self._root_dir = root_dir
        self._now_ms = now_ms
        self._interval_s = derived_flush_interval_ms / 1000
        self._recorded = recorded or Checkpoint(0, 0, 0, 0)
        self._derived_flushed_at_s = time.monotonic()
        # The dispatched offset the previous ``derived_due`` saw (None: none yet).
        self._seen_dispatched: int | None = None

    @property
    def recorded(self) -> Checkpoint:
        """What the checkpoint file says now (zeros when it vouches for nothing)."""
        return self._recorded

    def derived_due(self, dispatched: int) -> bool:
        """Whether a periodic checkpoint should flush derived data (see the module rules)."""
        previous, self._seen_dispatched = self._seen_dispatched, dispatched
        if dispatched <= self._recorded.dispatched_physical_offset:
            return False  # nothing dispatched since the last derived flush
        interval_passed = time.monotonic() - self._derived_flushed_at_s >= self._interval_s
        return interval_passed or dispatched == previous

    def record(self, flushed: int, dispatched: int | None) -> Checkpoint:
        """Save a checkpoint at ``flushed`` (the CommitLog flush that returned it) and, after a
        derived flush, ``dispatched`` (None: keep the recorded one). Call under ``lock``."""
        now_ms = self._now_ms()
        checkpoint = dataclasses.replace(
            self._recorded, flushed_physical_offset=flushed, flushed_timestamp_ms=now_ms
        )
        if dispatched is not None:
            checkpoint = dataclasses.replace(
                checkpoint, dispatched_physical_offset=dispatched, index_timestamp_ms=now_ms
            )
            self._derived_flushed_at_s = time.monotonic()
        self._save(checkpoint)
        return checkpoint

    def lower(self, flushed_max: int, dispatched_max: int) -> None:
        """Make the saved record vouch for no flushed byte at or past ``flushed_max`` and no
        derived data at or past ``dispatched_max``: before cutting the CommitLog or derived
        data there, or once recovery cut them. Call under ``lock`` (or before any write)."""
        recorded = self._recorded
        if (
            recorded.flushed_physical_offset <= flushed_max
            and recorded.dispatched_physical_offset <= dispatched_max
        ):
            return
        self._save(
            dataclasses.replace(
                recorded,
                flushed_physical_offset=min(recorded.flushed_physical_offset, flushed_max),
                dispatched_physical_offset=min(recorded.dispatched_physical_offset, dispatched_max),
            )
        )

    def _save(self, checkpoint: Checkpoint) -> None:
        save_checkpoint(self._fs, self._root_dir, checkpoint)
        self._recorded = checkpoint
