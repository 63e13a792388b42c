import threading
import time

import pytest

from raftlog.store.commit_log import CommitLog
from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.errors import FlushFailedError, StoreClosedError
from raftlog.store.flusher import GroupCommitFlusher, PeriodicFlusher
from raftlog.store.record import encode_record, patch_record
from tests.support import make_record
from tests.support.sim_filesystem import SimFileHandle, SimFileSystem


class GatedFileSystem(SimFileSystem):
    """Counts segment fsyncs and the threads running them; while ``gate`` is closed, the
    first fsync blocks after announcing itself on ``fsync_entered``."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.fsync_entered = threading.Event()
        self.fsync_calls = 0
        self.fsync_threads: list[int] = []

    def open(self, path: str, create: bool = True) -> SimFileHandle:
        handle = super().open(path, create)
        plain_sync = handle.sync

        def gated_sync() -> None:
            self.fsync_calls += 1
            self.fsync_threads.append(threading.get_ident())
            if self.fsync_calls == 1:
                self.fsync_entered.set()
                assert self.gate.wait(10)
            plain_sync()

        handle.sync = gated_sync  # type: ignore[method-assign]
        return handle


def open_log(fs: SimFileSystem) -> CommitLog:
    return CommitLog(fs, "/store/commitlog", segment_size_bytes=1 << 20)


def append_one(log: CommitLog) -> int:
    """Append a record; returns the end offset a writer waits for."""
    record = bytearray(encode_record(make_record()))
    position = log.position_for(len(record))
    patch_record(record, 0, queue_offset=0, physical_offset=position, store_timestamp_ms=1)
    log.append(record)
    return position + len(record)


def wait_until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


def test_wait_flushed_returns_once_the_bytes_are_durable() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    flusher = GroupCommitFlusher(log)
    flusher.start()
    try:
        end = append_one(log)
        flusher.wait_flushed(end, timeout_s=5)
        assert log.flushed_offset >= end
        assert fs.sync_count["/store/commitlog/00000000000000000000"] >= 1
    finally:
        flusher.stop()


def test_one_fsync_serves_every_writer_waiting_during_the_previous_one() -> None:
    fs = GatedFileSystem()
    log = open_log(fs)
    flusher = GroupCommitFlusher(log)
    flusher.start()
    append_lock = threading.Lock()  # the store's single writer
    acked: list[int] = []

    def writer() -> None:
        with append_lock:
            end = append_one(log)
        flusher.wait_flushed(end, timeout_s=10)
        acked.append(end)

    fs.gate.clear()
    first = threading.Thread(target=writer)
    first.start()
    assert fs.fsync_entered.wait(5)  # the first writer's fsync is in progress
    others = [threading.Thread(target=writer) for _ in range(49)]
    for thread in others:
        thread.start()
    wait_until(lambda: flusher.waiting_writers == 50)
    fs.gate.set()
    for thread in [first, *others]:
        thread.join(10)
    flusher.stop()
    assert len(acked) == 50
    # One fsync for the first writer, one for the 49 that queued behind it.
    assert fs.fsync_calls == 2


def test_an_fsync_error_reaches_every_waiter_and_stop() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    flusher = GroupCommitFlusher(log)
    flusher.start()
    fs.fail_syncs = 1
    end = append_one(log)
    with pytest.raises(FlushFailedError, match="injected"):
        flusher.wait_flushed(end, timeout_s=5)
    assert log.flushed_offset < end
    with pytest.raises(FlushFailedError):
        flusher.wait_flushed(append_one(log), timeout_s=5)
    assert isinstance(flusher.error, FlushFailedError)
    with pytest.raises(FlushFailedError):
        flusher.stop()


def test_a_lone_writer_runs_its_own_fsync_on_its_own_thread() -> None:
    fs = GatedFileSystem()
    log = open_log(fs)
    flusher = GroupCommitFlusher(log)
    flusher.start()
    end = append_one(log)
    flusher.wait_flushed(end, timeout_s=5)
    assert log.flushed_offset == end
    # No hand-off to another thread: the writer's own thread ran the one fsync.
    assert fs.fsync_threads == [threading.get_ident()]
    flusher.stop()


def test_a_writer_waiting_for_another_writers_hanging_fsync_times_out() -> None:
    fs = GatedFileSystem()
    log = open_log(fs)
    flusher = GroupCommitFlusher(log)
    flusher.start()
    fs.gate.clear()
    first_end = append_one(log)
    leader = threading.Thread(target=flusher.wait_flushed, args=(first_end, 10))
    leader.start()
    assert fs.fsync_entered.wait(5)  # the first writer runs the fsync, which hangs
    with pytest.raises(TimeoutError):
        flusher.wait_flushed(append_one(log), timeout_s=0.05)
    fs.gate.set()
    leader.join(5)
    assert not leader.is_alive()
    flusher.stop()
    assert log.flushed_offset == log.max_offset


def test_a_writer_whose_bytes_were_truncated_away_times_out_without_spinning() -> None:
    fs = GatedFileSystem()
    log = open_log(fs)
    flusher = GroupCommitFlusher(log)
    flusher.start()
    ends = [append_one(log) for _ in range(2)]
    flusher.wait_flushed(ends[0], timeout_s=5)
    log.truncate_after(ends[0])  # the second record is gone before its writer waits
    syncs_before = fs.fsync_calls
    with pytest.raises(TimeoutError):
        flusher.wait_flushed(ends[1], timeout_s=0.2)
    assert fs.fsync_calls == syncs_before  # nothing to flush: it waited instead of looping
    flusher.stop()


def test_waiting_on_a_stopped_flusher_is_refused_unless_already_durable() -> None:
    log = open_log(SimFileSystem())
    flusher = GroupCommitFlusher(log)
    end = append_one(log)
    with pytest.raises(StoreClosedError):
        flusher.wait_flushed(end, timeout_s=1)
    log.flush()
    flusher.wait_flushed(end, timeout_s=1)


def test_periodic_flusher_flushes_on_its_interval() -> None:
    log = open_log(SimFileSystem())
    flusher = PeriodicFlusher(log, flush_interval_ms=5)
    flusher.start()
    try:
        end = append_one(log)
        wait_until(lambda: log.flushed_offset >= end)
    finally:
        flusher.stop()


def test_stop_flushes_once_more() -> None:
    log = open_log(SimFileSystem())
    for flusher in (PeriodicFlusher(log, flush_interval_ms=60_000), GroupCommitFlusher(log)):
        flusher.start()
        append_one(log)
        flusher.stop()
        assert log.flushed_offset == log.max_offset


def test_flushers_start_once_and_check_their_interval() -> None:
    log = open_log(SimFileSystem())
    flusher = GroupCommitFlusher(log)
    flusher.start()
    with pytest.raises(RuntimeError):
        flusher.start()
    flusher.stop()
    with pytest.raises(ValueError):
        PeriodicFlusher(log, flush_interval_ms=0)


# StoreConfig lives beside FlushMode in config.py; its checks are tested here.


def test_store_config_defaults_and_checks() -> None:
    config = StoreConfig(root_dir="/data")
    assert (config.segment_size_bytes, config.flush_mode, config.flush_interval_ms) == (
        1 << 30,
        FlushMode.SYNC_FLUSH,
        500,
    )
    assert (config.consume_queue_file_units, config.retention_hours) == (300_000, 72)
    for bad in (
        {"root_dir": ""},
        {"segment_size_bytes": 10},
        {"flush_interval_ms": 0},
        {"max_open_segments": 0},
        {"flush_mode": "SYNC_FLUSH"},
        {"disk_full_ratio": 0.5},
        {"disk_clean_watermark_ratio": 0.0},
    ):
        with pytest.raises(ValueError):
            StoreConfig(**{"root_dir": "/data", **bad})


def test_flush_publishes_the_offset_it_read_before_fsync_not_later_appends() -> None:
    fs = GatedFileSystem()
    log = open_log(fs)
    first_end = append_one(log)
    fs.gate.clear()
    flushing = threading.Thread(target=log.flush)
    flushing.start()
    assert fs.fsync_entered.wait(5)
    later_end = append_one(log)  # appends run during the fsync
    fs.gate.set()
    flushing.join(5)
    assert log.flushed_offset == first_end < later_end
    assert log.flush() == later_end


def test_a_truncation_during_a_flush_neither_breaks_it_nor_lets_it_publish() -> None:
    fs = GatedFileSystem()
    log = CommitLog(fs, "/store/commitlog", segment_size_bytes=1024)
    ends = [append_one(log) for _ in range(12)]  # three segments
    fs.gate.clear()
    outcome: list[object] = []

    def flush() -> None:
        try:
            outcome.append(log.flush())
        except Exception as error:
            outcome.append(error)

    flushing = threading.Thread(target=flush)
    flushing.start()
    assert fs.fsync_entered.wait(5)  # blocked in segment 0's fsync
    log.truncate_after(ends[1])  # drops the two later segments under the flush
    fs.gate.set()
    flushing.join(5)
    assert outcome == [0]  # the flush saw a truncation: it published nothing
    assert log.flush() == ends[1] == log.max_offset


def test_an_unexpected_flush_error_still_reaches_waiters() -> None:
    log = open_log(SimFileSystem())
    flusher = GroupCommitFlusher(log)
    flusher.start()
    end = append_one(log)
    log.close()  # a bug: closed under a running flusher
    with pytest.raises(FlushFailedError, match="closed"):
        flusher.wait_flushed(end, timeout_s=5)
    with pytest.raises(FlushFailedError):
        flusher.stop()


def test_a_writer_refilling_a_truncated_range_is_flushed() -> None:
    # Regression: the old flusher thread remembered the highest offset ever requested, so
    # after a truncation a writer asking for less never woke it and timed out.
    log = open_log(SimFileSystem())
    flusher = GroupCommitFlusher(log)
    flusher.start()
    ends = [append_one(log) for _ in range(3)]
    flusher.wait_flushed(ends[-1], timeout_s=5)
    log.truncate_after(ends[0])
    refilled_end = append_one(log)
    assert refilled_end <= ends[-1]
    flusher.wait_flushed(refilled_end, timeout_s=5)
    assert log.flushed_offset == refilled_end
    flusher.stop()
