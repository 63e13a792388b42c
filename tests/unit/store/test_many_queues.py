"""10,000 queues across 1,000 topics: one message each, written and read back, with the number
of open file handles bounded however many queues exist."""

from __future__ import annotations

import os
import threading

from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.filesystem import OsFileHandle, OsFileSystem
from raftlog.store.message_store import Message, MessageStore

MAX_OPEN_QUEUE_FILES = 64
MAX_OPEN_SEGMENTS = 4
# Files a store holds open for a moment besides cached handles (an atomic config write).
TRANSIENT_HANDLES = 1


class CountingFileSystem(OsFileSystem):
    """The real disk, counting the handles open now and at most."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open_handles = 0
        self.max_open_handles = 0

    def open(self, path: str, create: bool = True) -> OsFileHandle:
        handle = _CountedHandle(self, path, create)
        with self._lock:
            self.open_handles += 1
            self.max_open_handles = max(self.max_open_handles, self.open_handles)
        return handle

    def closed_one(self) -> None:
        with self._lock:
            self.open_handles -= 1


class _CountedHandle(OsFileHandle):
    __slots__ = ("_counter",)

    def __init__(self, counter: CountingFileSystem, path: str, create: bool) -> None:
        super().__init__(path, create)
        self._counter: CountingFileSystem | None = counter

    def close(self) -> None:
        super().close()
        if self._counter is not None:
            self._counter.closed_one()
            self._counter = None


def config(root) -> StoreConfig:
    return StoreConfig(
        root_dir=str(root),
        segment_size_bytes=1 << 20,
        consume_queue_file_units=1000,
        index_slot_count=4096,
        index_entry_count=50_000,
        flush_mode=FlushMode.ASYNC_FLUSH,
        max_open_segments=MAX_OPEN_SEGMENTS,
    )


def open_store(root, fs) -> MessageStore:
    return MessageStore.open(
        config(root), fs, max_open_queue_files=MAX_OPEN_QUEUE_FILES, housekeeping_interval_ms=None
    )


def open_under(root) -> list[str]:
    """The process's descriptors open on files under ``root``: the store's own, whatever
    other tests of this process open or close meanwhile (their channels, their files)."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # closed since the listing (or listdir's own descriptor)
    return [t for t in targets if t.startswith(f"{root}{os.sep}")]


def test_ten_thousand_queues_with_bounded_open_files(tmp_path) -> None:
    topic_count, queues_per_topic = 1000, 10
    fs = CountingFileSystem()
    assert open_under(tmp_path) == []
    store = open_store(tmp_path, fs)
    store.create_topics([(f"topic-{t}", queues_per_topic) for t in range(topic_count)])
    messages = [
        Message(f"topic-{t}", q, b"%d/%d" % (t, q), keys=(f"k{t}-{q}",))
        for t in range(topic_count)
        for q in range(queues_per_topic)
    ]
    for start in range(0, len(messages), 1000):
        for result in store.put_messages(messages[start : start + 1000]):
            assert result.queue_offset == 0
    for t in range(topic_count):
        for q in range(queues_per_topic):
            (record,) = store.get_messages(f"topic-{t}", q, 0, 10).messages
            assert record.body == b"%d/%d" % (t, q)
    assert [m.body for m in store.query_by_key("topic-7", "k7-3", 0, 2**62)] == [b"7/3"]
    # The process's real descriptors: cached handles, segments and the directory lock.
    assert len(open_under(tmp_path)) <= MAX_OPEN_QUEUE_FILES + MAX_OPEN_SEGMENTS + 1
    store.close()
    bound = MAX_OPEN_QUEUE_FILES + MAX_OPEN_SEGMENTS + TRANSIENT_HANDLES
    assert fs.max_open_handles <= bound, fs.max_open_handles
    assert fs.open_handles == 0
    # Reopening opens queues lazily: still bounded, and the data is all there.
    store = open_store(tmp_path, fs)
    assert store.get_messages("topic-999", 9, 0, 1).messages[0].body == b"999/9"
    assert store.put_message(Message("topic-500", 5, b"again")).queue_offset == 1
    store.close()
    assert fs.max_open_handles <= bound
    assert open_under(tmp_path) == []
