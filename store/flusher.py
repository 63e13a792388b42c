"""Flushers: how CommitLog writes become durable bytes.

- ``GroupCommitFlusher`` (SYNC_FLUSH): writers append, then ``wait_flushed(end)``. Group commit
  is leader/follower, with no thread of its own: a writer that finds no fsync in progress runs
  ``CommitLog.flush()`` itself, and that one fsync acknowledges every writer whose bytes were
  appended before it started. Writers arriving during it wait; when it ends, one of those still
  not durable runs the next fsync for all of them. A single writer thus pays write + fsync,
  with no thread hand-off on the acknowledgement path.
- ``PeriodicFlusher`` (ASYNC_FLUSH): a background thread flushes every ``flush_interval_ms``;
  nobody waits.

Rules this module keeps:
- Appends stay single-writer and never wait for an fsync: ``CommitLog.flush`` records
  ``max_offset`` before fsyncing and publishes ``flushed_offset`` after (commit_log.py), so a
  pwrite beyond the flushed offset can run during the fsync.
- ``_condition`` guards ``_flushing``, ``_waiting_writers``, ``_error`` and ``_running``; the
  fsync itself runs outside it. At most one writer flushes at a time (``_flushing``).
- A writer flushes only when the CommitLog holds unflushed bytes; a writer whose bytes a
  ``CommitLog.truncate_after`` cut away waits (for a later writer's fsync past its end, or its
  timeout) instead of spinning. A writer refilling a truncated range asks for less than earlier
  writers did, and is served like any other: nothing remembers the highest request.
- A failed fsync is never a silent ack: every current and later waiter gets
  FlushFailedError, and ``stop()`` raises it too. The CommitLog keeps the failure sticky.
- Timeouts: a writer waiting for another writer's fsync gives up after ``timeout_s``
  (TimeoutError: written, outcome unknown). A writer running the fsync itself returns when the
  fsync does (the OS cannot abandon one), acknowledged if it succeeded.
- ``stop()`` flushes once more, so a clean shutdown leaves nothing unsynced; after it, a
  writer whose bytes are not yet durable gets StoreClosedError.
"""

from __future__ import annotations

import threading
import time

from raftlog.store.commit_log import CommitLog
from raftlog.store.errors import FlushFailedError, StoreClosedError


class _Flusher:
    """What both flushers share: start/stop state, and a flush whose failure is recorded."""

    def __init__(self, commit_log: CommitLog) -> None:
        self._commit_log = commit_log
        self._condition = threading.Condition()
        self._running = False
        self._started = False
        self._error: FlushFailedError | None = None

    @property
    def error(self) -> FlushFailedError | None:
        """The flush failure that stopped this flusher, if any."""
        return self._error

    def start(self) -> None:
        with self._condition:
            if self._started:
                raise RuntimeError(f"{type(self).__name__} already started")
            self._started = self._running = True

    def stop(self) -> None:
        """Stop, then flush once more (raises FlushFailedError if that fails)."""
        with self._condition:
            self._running = False
            self._condition.notify_all()
        try:
            self._flush()
        finally:
            with self._condition:
                self._condition.notify_all()

    def _flush(self) -> None:
        """Flush; any failure is recorded (waiters see it) and raised as FlushFailedError."""
        try:
            self._commit_log.flush()
        except FlushFailedError as error:
            self._record(error)
            raise
        except Exception as error:
            failure = FlushFailedError(f"flush failed: {error!r}")
            self._record(failure)
            raise failure from error

    def _record(self, error: FlushFailedError) -> None:
        with self._condition:
            self._error = error


class GroupCommitFlusher(_Flusher):
    """SYNC_FLUSH leader/follower group commit (see the module docstring)."""

    def __init__(self, commit_log: CommitLog) -> None:
        super().__init__(commit_log)
        self._flushing = False
        self._waiting_writers = 0

    @property
    def waiting_writers(self) -> int:
        """Writers in ``wait_flushed`` right now (the one running the fsync included)."""
        with self._condition:
            return self._waiting_writers

    def wait_flushed(self, physical_offset_end: int, timeout_s: float) -> None:
        """Return once every byte below ``physical_offset_end`` is durable, running the fsync
        on this thread when none is in progress. Raises FlushFailedError if an fsync failed,
        TimeoutError after ``timeout_s`` spent waiting for other writers' fsyncs, and
        StoreClosedError if the flusher stopped first."""
        commit_log = self._commit_log
        if commit_log.flushed_offset >= physical_offset_end:
            return
        deadline_s = time.monotonic() + timeout_s
        with self._condition:
            self._waiting_writers += 1
            try:
                while commit_log.flushed_offset < physical_offset_end:
                    if self._error is not None:
                        raise FlushFailedError(
                            f"not durable: {self._error}; bytes below {physical_offset_end} "
                            "may be lost"
                        ) from self._error
                    if not self._running:
                        raise StoreClosedError(
                            f"the flusher stopped before {physical_offset_end} was flushed"
                        )
                    if not self._flushing and commit_log.max_offset > commit_log.flushed_offset:
                        self._lead_flush()
                        continue
                    remaining_s = deadline_s - time.monotonic()
                    if remaining_s <= 0:
                        raise TimeoutError(
                            f"{physical_offset_end} not flushed within {timeout_s} s (flushed: "
                            f"{commit_log.flushed_offset})"
                        )
                    self._condition.wait(remaining_s)
            finally:
                self._waiting_writers -= 1

    def _lead_flush(self) -> None:
        """Run one fsync for every writer, outside the condition (held on entry and exit);
        a failure is recorded for the caller's loop to raise."""
        self._flushing = True
        self._condition.release()
        try:
            self._flush()
        except FlushFailedError:
            pass
        finally:
            self._condition.acquire()
            self._flushing = False
            self._condition.notify_all()


class PeriodicFlusher(_Flusher):
    """ASYNC_FLUSH: a daemon thread fsyncs every ``flush_interval_ms`` (RocketMQ: 500 ms) and
    stops after a flush failure."""

    def __init__(self, commit_log: CommitLog, flush_interval_ms: int = 500) -> None:
        if flush_interval_ms <= 0:
            raise ValueError(f"flush_interval_ms must be positive, got {flush_interval_ms}")
        super().__init__(commit_log)
        self._flush_interval_ms = flush_interval_ms
        self._thread = threading.Thread(target=self._run, name="periodic-flusher", daemon=True)

    def start(self) -> None:
        super().start()
        self._thread.start()

    def stop(self) -> None:
        with self._condition:
            self._running = False
            self._condition.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        super().stop()

    def _run(self) -> None:
        while True:
            with self._condition:
                if self._running:
                    self._condition.wait(self._flush_interval_ms / 1000)
                if not self._running:
                    return
            try:
                self._flush()
            except FlushFailedError:
                return
