import threading
import time

import pytest

from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.errors import DiskFullError
from raftlog.store.message_store import Message, MessageStore
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.store.test_message_store import Clock, open_store

T0 = 1_764_000_000_000  # 16:00 UTC
HOUR_MS = 3_600_000
EXPIRED_AT_DELETE_HOUR = T0 + 84 * HOUR_MS  # 04:00 UTC, 3.5 days later
EXPIRED_OFF_HOUR = T0 + 80 * HOUR_MS  # 00:00 UTC


class UsageFileSystem(SimFileSystem):
    """Disk use proportional to the CommitLog bytes held, so deletions lower it."""

    def __init__(self, full_disk_bytes: int) -> None:
        super().__init__()
        self.full_disk_bytes = full_disk_bytes

    def used_bytes(self) -> int:
        with self.lock:
            return sum(len(i.current) for name, i in self._files.items() if "/commitlog/" in name)

    def disk_usage_ratio(self, path: str) -> float:
        return self.used_bytes() / self.full_disk_bytes


def fill(store, clock, count, timestamp_ms, body_bytes=200):
    clock.now_ms = timestamp_ms
    return store.put_messages(
        [
            Message("t", i % 2, b"x" * body_bytes, keys=(f"k{timestamp_ms}-{i}",))
            for i in range(count)
        ]
    )


def make(tmp_path, full_disk_bytes=10**9):
    clock = Clock(T0)
    fs = UsageFileSystem(full_disk_bytes)
    store = open_store(
        tmp_path,
        fs,
        clock,
        segment_size_bytes=1024,
        consume_queue_file_units=2,
        index_entry_count=4,
    )
    store.create_topic("t", 2)
    return store, clock, fs


def segment_count(store) -> int:
    return len(store.commit_log.segments())


def test_expired_segments_go_at_the_delete_hour_only(tmp_path) -> None:
    store, clock, _ = make(tmp_path)
    old = fill(store, clock, 16, T0)
    new = fill(store, clock, 4, T0 + 60 * HOUR_MS)
    segments_before = segment_count(store)
    clock.now_ms = EXPIRED_OFF_HOUR
    assert store.run_retention().deleted_segments == 0
    clock.now_ms = EXPIRED_AT_DELETE_HOUR
    report = store.run_retention()
    assert report.deleted_segments > 0
    assert report.deleted_consume_queue_files > 0 and report.deleted_index_files > 0
    assert segment_count(store) == segments_before - report.deleted_segments
    min_physical_offset = store.commit_log.min_offset
    assert min_physical_offset > old[-1].physical_offset  # every old message is gone
    for queue_id in (0, 1):
        got = store.get_messages("t", queue_id, 0, 100)
        assert got.min_queue_offset == 8 and [m.queue_offset for m in got] == [8, 9]
    assert [m.physical_offset for m in store.query_by_key("t", f"k{T0}-3", 0, 2 * T0)] == []
    assert store.query_by_key("t", f"k{T0 + 60 * HOUR_MS}-3", 0, 2 * T0)[0].body
    assert {r.physical_offset for r in new} <= {
        m.physical_offset for q in (0, 1) for m in store.get_messages("t", q, 0, 100)
    }
    store.close()


def test_clean_watermark_deletes_expired_at_any_hour_but_keeps_unexpired(tmp_path) -> None:
    store, clock, fs = make(tmp_path)
    fill(store, clock, 16, T0)
    fill(store, clock, 16, T0 + 60 * HOUR_MS)
    fs.full_disk_bytes = int(fs.used_bytes() / 0.8)  # 80%: above clean, below force
    clock.now_ms = EXPIRED_OFF_HOUR
    assert store.run_retention().deleted_segments > 0
    oldest_kept = store.commit_log.segments()[0].last_modified_ms
    assert oldest_kept is not None and oldest_kept >= T0 + 60 * HOUR_MS
    store.close()


def test_force_ratio_deletes_unexpired_oldest_first_never_the_active(tmp_path) -> None:
    store, clock, fs = make(tmp_path)
    fill(store, clock, 40, T0)
    fs.full_disk_bytes = fs.used_bytes()  # 100%
    clock.now_ms = T0 + HOUR_MS  # nothing expired
    deleted = 0
    while True:
        report = store.run_retention()
        if not report.deleted_segments:
            break
        deleted += report.deleted_segments
    assert deleted > 0 and segment_count(store) >= 1
    assert store.commit_log.segments()[-1].start_offset <= store.commit_log.max_offset
    store.close()


def test_writes_refused_when_full_resume_after_retention_frees_space(tmp_path) -> None:
    store, clock, fs = make(tmp_path)
    fill(store, clock, 40, T0)
    fs.full_disk_bytes = int(fs.used_bytes() / 0.95)
    before = store.commit_log.max_offset
    with pytest.raises(DiskFullError):
        fill(store, clock, 1, T0)
    assert store.commit_log.max_offset == before
    clock.now_ms = T0 + HOUR_MS
    while store.is_disk_full() and store.run_retention().deleted_segments:
        pass
    assert not store.is_disk_full()
    assert fill(store, clock, 1, T0 + HOUR_MS)[0].queue_offset == 20
    store.close()


def test_reads_racing_a_retention_pass_never_fail(tmp_path) -> None:
    # Regression: a read that picked a record, then lost its segment to a concurrent
    # retention pass, raised InvalidOffsetError ("no segment holds ...") instead of moving on.
    clock = Clock(T0)
    store = MessageStore.open(
        StoreConfig(
            root_dir=str(tmp_path),
            segment_size_bytes=4096,
            consume_queue_file_units=16,
            index_slot_count=64,
            index_entry_count=256,
            flush_mode=FlushMode.ASYNC_FLUSH,
            retention_hours=0,  # every sealed segment is expired...
            disk_clean_watermark_ratio=1e-9,  # ...and may go at any hour
            disk_force_clean_ratio=1.0,
            disk_full_ratio=1.0,
        ),
        now_ms=clock,
        housekeeping_interval_ms=None,
    )
    store.create_topic("t", 1)
    failures: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                store.get_messages("t", 0, 0, 64)
                store.queue_offset_for_time("t", 0, clock.now_ms - 5)
                store.query_by_key("t", "k5", 0, clock.now_ms)
            except Exception as error:  # every failure is the finding
                failures.append(error)

    thread = threading.Thread(target=reader)
    thread.start()
    deleted = 0
    deadline_s = time.monotonic() + 3
    try:
        for _ in range(400):
            if time.monotonic() > deadline_s:
                break
            store.put_messages([Message("t", 0, b"x" * 200, keys=(f"k{i}",)) for i in range(40)])
            clock.now_ms += 1000
            deleted += store.run_retention().deleted_segments
    finally:
        stop.set()
        thread.join(10)
    store.close()
    assert deleted > 50
    assert failures == []
