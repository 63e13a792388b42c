"""Flushers: the threads that turn CommitLog writes into durable bytes.

- ``GroupCommitFlusher`` (SYNC_FLUSH): writers append, then ``wait_flushed(end)``; one
  background thread runs ``CommitLog.flush()``, and one fsync acknowledges every writer whose
  bytes were appended before it started (group commit). Writers that arrive during an fsync
  are served together by the next one.
- ``PeriodicFlusher`` (ASYNC_FLUSH): flushes every ``flush_interval_ms``; nobody waits.

Rules this module keeps:
- Appends stay single-writer and never wait for an fsync: ``CommitLog.flush`` records
  ``max_offset`` before fsyncing and publishes ``flushed_offset`` after (commit_log.py), so a
  pwrite beyond the flushed offset can run during the fsync.
- ``GroupCommitFlusher._condition`` guards ``_requested_offset``, ``_idle``,
  ``_waiting_writers``, ``_error`` and ``_running``; the fsync itself runs outside it.
- A waiter always wakes an idle flusher thread. The highest offset ever requested is no
  proof that a flush is coming: after ``CommitLog.truncate_after`` it can lie past the end,
  and a writer refilling the truncated range asks for less than it.
- A failed fsync is never a silent ack: every current and later waiter gets
  FlushFailedError, and ``stop()`` raises it too. The CommitLog keeps the failure sticky.
- ``stop()`` flushes once more, so a clean shutdown leaves nothing unsynced.
"""

from __future__ import annotations

import abc
import threading
import time

from raftlog.store.commit_log import CommitLog
from raftlog.store.errors import FlushFailedError, StoreClosedError


class _FlusherThread(abc.ABC):
    """Start/stop plumbing shared by both flushers: a daemon thread running ``_run``."""

    _thread_name = "flusher"

    def __init__(self, commit_log: CommitLog) -> None:
        self._commit_log = commit_log
        self._condition = threading.Condition()
        self._running = False
        self._error: FlushFailedError | None = None
        self._thread: threading.Thread | None = None

    @property
    def error(self) -> FlushFailedError | None:
        """The flush failure that stopped this flusher, if any."""
        return self._error

    def start(self) -> None:
        with self._condition:
            if self._thread is not None:
                raise RuntimeError(f"{self._thread_name} already started")
            self._running = True
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, then flush once more (raises FlushFailedError if that fails)."""
        with self._condition:
            self._running = False
            self._condition.notify_all()
        if self._thread is not None:
            self._thread.join()
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

    @abc.abstractmethod
    def _run(self) -> None:
        """The thread's loop; returns when stopped or after a flush failure."""


class GroupCommitFlusher(_FlusherThread):
    """SYNC_FLUSH group commit (see the module docstring)."""

    _thread_name = "group-commit-flusher"

    def __init__(self, commit_log: CommitLog) -> None:
        super().__init__(commit_log)
        self._requested_offset = 0
        # True while the thread sleeps waiting for work: only then must a waiter notify it.
        self._idle = False
        self._waiting_writers = 0

    @property
    def waiting_writers(self) -> int:
        """Writers blocked in ``wait_flushed`` right now."""
        with self._condition:
            return self._waiting_writers

    def wait_flushed(self, physical_offset_end: int, timeout_s: float) -> None:
        """Block until every byte below ``physical_offset_end`` is durable. Raises
        FlushFailedError if an fsync failed, TimeoutError after ``timeout_s``, and
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
                    if physical_offset_end > self._requested_offset or self._idle:
                        self._requested_offset = max(self._requested_offset, physical_offset_end)
                        self._condition.notify_all()
                    remaining_s = deadline_s - time.monotonic()
                    if remaining_s <= 0:
                        raise TimeoutError(
                            f"{physical_offset_end} not flushed within {timeout_s} s (flushed: "
                            f"{commit_log.flushed_offset})"
                        )
                    self._condition.wait(remaining_s)
            finally:
                self._waiting_writers -= 1

    def _has_work(self) -> bool:
        flushed_offset = self._commit_log.flushed_offset
        # The second test keeps a request past max_offset (after a truncation) from spinning.
        return (
            self._requested_offset > flushed_offset and self._commit_log.max_offset > flushed_offset
        )

    def _run(self) -> None:
        while True:
            with self._condition:
                while self._running and not self._has_work():
                    self._idle = True
                    self._condition.wait()
                self._idle = False
                if not self._running:
                    return
            try:
                self._flush()
            except FlushFailedError:
                return
            finally:
                with self._condition:
                    self._condition.notify_all()


class PeriodicFlusher(_FlusherThread):
    """ASYNC_FLUSH: fsync every ``flush_interval_ms`` (RocketMQ: 500 ms)."""

    _thread_name = "periodic-flusher"

    def __init__(self, commit_log: CommitLog, flush_interval_ms: int = 500) -> None:
        if flush_interval_ms <= 0:
            raise ValueError(f"flush_interval_ms must be positive, got {flush_interval_ms}")
        super().__init__(commit_log)
        self._flush_interval_ms = flush_interval_ms

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
