"""ConsumeQueue: the per topic/queue index of 20-byte units into the CommitLog.

Layout (docs/store-format.md): ``<root>/consumequeue/<topic>/<queue_id>/<20-digit start byte>``,
each file holding at most ``file_units`` units of ``commitlog_offset(8) | size(4) |
tag_hash(8)``, big-endian. A message's queue offset is its unit's byte position / 20.

Rules this module keeps:
- Units are dense: ``append_units`` takes the next queue offset exactly; nothing is skipped.
- Units point at ascending physical offsets, so "first unit at or past physical offset P" is a
  binary search. Truncation (recovery, Raft) and retention use it.
- Files grow as units are appended (no preallocation); a new file starts only when the previous
  one is full, so the last file's size gives the queue's end. Trailing units whose size field is
  0 are torn zeros from a crash and are dropped on load.
- No queue owns a file descriptor: every read and write goes through one ``FileHandleCache``
  shared by all queues (and the IndexFiles), which bounds the number of open files however many
  queues exist. I/O runs under the cache's lock, so eviction never closes a handle in use.
- ConsumeQueues are derived data: after a crash they are truncated and rebuilt from the
  CommitLog, so writes here are not synced one by one, nor are the directories of new files;
  ``FileHandleCache.sync_dirty`` makes both durable before a checkpoint records them as
  dispatched. (One directory fsync per new file would dominate writing to 10,000 new queues.)
- Write-behind: a queue given a ``WriteBehind`` buffers appended units in memory and writes
  them in one pass with every other queue's (each file opened once per pass, a file's units in
  one pwrite) when ``WriteBehind.write_all`` runs: at its bound on buffered units, and by the
  store before every checkpoint and close. Reads (units, ``max_queue_offset``, time and
  physical-offset searches) see buffered units as if written. A crash loses only buffered
  units, which lie past the last checkpoint's dispatched offset and are redone from the
  CommitLog. (One open + pwrite + close per unit thrashed the handle cache at 10,000 queues.)
"""

from __future__ import annotations

import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from raftlog.store.errors import InvalidOffsetError
from raftlog.store.filesystem import FileHandle, FileSystem, OsFileSystem
from raftlog.store.segment import parse_segment_file_name, segment_file_name

UNIT_SIZE_BYTES = 20
# From this many dirty files on, one syncfs beats per-file fsyncs on the real disk (measured
# here: 10,000 fdatasyncs of 20-byte appends 8.7 s, one syncfs over the same writes 0.06 s).
_SYNCFS_MIN_FILES = 64
CONSUME_QUEUE_DIR = "consumequeue"
_UNIT = struct.Struct(">QIQ")
assert _UNIT.size == UNIT_SIZE_BYTES


class ConsumeQueueUnit(NamedTuple):
    """One decoded unit: where the message's record is and its tag hash."""

    physical_offset: int
    size_bytes: int
    tag_hash: int


def encode_unit(physical_offset: int, size_bytes: int, tag_hash: int) -> bytes:
    """The 20 bytes of one unit."""
    return _UNIT.pack(physical_offset, size_bytes, tag_hash)


# See ConsumeQueue._tombstones_before.
_TOMBSTONE_UNIT = encode_unit(0, 1, 0)


def decode_unit(buf: bytes | memoryview, pos: int = 0) -> ConsumeQueueUnit:
    """The unit whose 20 bytes start at ``pos``."""
    return ConsumeQueueUnit._make(_UNIT.unpack_from(buf, pos))


class WriteBehind:
    """The ConsumeQueues holding buffered units, and how many units they hold in all.

    Single writer, like the queues: the dispatcher adds units, and the store calls
    ``write_all`` or ``take`` under the same lock that serialises dispatch. Queues ``take``
    returned may be written (``write_buffered``) by another thread after that lock is
    released: each queue's own lock orders its appends and writes."""

    def __init__(self, max_buffered_units: int) -> None:
        assert max_buffered_units >= 1
        self._max_buffered_units = max_buffered_units
        self._queues: dict[ConsumeQueue, None] = {}  # insertion-ordered set
        self._buffered_units = 0

    @property
    def buffered_units(self) -> int:
        """Units added since the last ``write_all`` (an upper bound once a queue truncated)."""
        return self._buffered_units

    def added(self, queue: ConsumeQueue, unit_count: int) -> None:
        """``queue`` buffered ``unit_count`` more units; at the bound, write everything."""
        self._queues[queue] = None
        self._buffered_units += unit_count
        if self._buffered_units >= self._max_buffered_units:
            self.write_all()

    def write_all(self) -> None:
        """Write every buffered unit to its file (not synced: see ``FileHandleCache``)."""
        for queue in self.take():
            queue.write_buffered()

    def take(self) -> list[ConsumeQueue]:
        """The queues holding buffered units, forgotten here: the caller writes them."""
        queues = list(self._queues)
        self._queues.clear()
        self._buffered_units = 0
        return queues


@dataclass(frozen=True, slots=True)
class DirtyFiles:
    """Files with writes not yet known durable, and directories whose entries changed."""

    paths: set[str]
    directories: set[str]


class FileHandleCache:
    """A bounded LRU of open file handles shared by every ConsumeQueue and IndexFile.

    Each operation opens the file if needed (evicting the least recently used handle beyond
    ``max_open_handles``) and runs under one lock, so a handle is never closed while in use.
    Paths written since the last ``take_dirty`` are remembered, even after their handle was
    evicted: fsync through a new descriptor makes the file's earlier writes durable too. Fsyncs
    hold no lock here, so at most one descriptor per syncing thread exists beyond the bound.
    """

    def __init__(self, fs: FileSystem, max_open_handles: int) -> None:
        assert max_open_handles >= 1
        self._fs = fs
        self._max_open_handles = max_open_handles
        self._handles: OrderedDict[str, FileHandle] = OrderedDict()
        self._dirty_paths: set[str] = set()
        self._dirty_directories: set[str] = set()
        self._lock = threading.Lock()

    @property
    def open_handle_count(self) -> int:
        return len(self._handles)

    def pread(self, path: str, size_bytes: int, position: int) -> bytes:
        """Up to ``size_bytes`` at ``position``; empty when the file is gone (a reader racing
        retention must not recreate a deleted file)."""
        with self._lock:
            try:
                handle = self._handle(path, create=False)
            except FileNotFoundError:
                return b""
            return handle.pread(size_bytes, position)

    def pwrite(self, path: str, data: bytes | bytearray | memoryview, position: int) -> None:
        with self._lock:
            self._handle(path, create=True).pwrite(data, position)
            self._dirty_paths.add(path)

    def truncate(self, path: str, size_bytes: int) -> None:
        with self._lock:
            self._handle(path, create=True).truncate(size_bytes)
            self._dirty_paths.add(path)

    def sync(self, path: str) -> None:
        """Make ``path``'s writes so far durable."""
        with self._lock:
            self._dirty_paths.discard(path)
        self.sync_files(DirtyFiles(paths={path}, directories=set()))

    def mark_directory_dirty(self, directory: str) -> None:
        """A file was created in ``directory``; ``sync_dirty`` will make its entry durable."""
        with self._lock:
            self._dirty_directories.add(directory)

    def take_dirty(self) -> DirtyFiles:
        """The files written (and directories changed) since the last take; ``sync_files``
        them to make those writes durable. Taking is cheap, so a caller can take under its own
        lock to fix a point in time and fsync after releasing it."""
        with self._lock:
            dirty = DirtyFiles(self._dirty_paths, self._dirty_directories)
            self._dirty_paths, self._dirty_directories = set(), set()
            return dirty

    def sync_files(self, dirty: DirtyFiles) -> None:
        """Fsync what ``take_dirty`` returned. The fsyncs run through separate descriptors and
        outside the lock, so reads and writes of other files go on meanwhile (an fsync makes
        the file's writes through any descriptor durable). On failure the paths stay dirty.
        Many files on the real disk take one syncfs instead (filesystem.py says when)."""
        try:
            if (
                len(dirty.paths) + len(dirty.directories) >= _SYNCFS_MIN_FILES
                and isinstance(self._fs, OsFileSystem)
                and self._fs.sync_filesystems_of([*dirty.paths, *dirty.directories])
            ):
                return
            for path in sorted(dirty.paths):
                try:
                    handle = self._fs.open(path, create=False)
                except FileNotFoundError:
                    continue  # removed since it was written: nothing left to make durable
                try:
                    handle.sync()
                finally:
                    handle.close()
            for directory in sorted(dirty.directories):
                self._fs.sync_dir(directory)
        except BaseException:
            with self._lock:
                self._dirty_paths |= dirty.paths
                self._dirty_directories |= dirty.directories
            raise

    def sync_dirty(self) -> None:
        """Make every write so far durable, and the directories of files created since."""
        self.sync_files(self.take_dirty())

    def remove(self, path: str) -> None:
        """Close ``path``'s handle if open, and delete the file."""
        with self._lock:
            handle = self._handles.pop(path, None)
            if handle is not None:
                handle.close()
            self._dirty_paths.discard(path)
            self._fs.remove(path)

    def close_all(self) -> None:
        with self._lock:
            for handle in self._handles.values():
                handle.close()
            self._handles.clear()

    def _handle(self, path: str, create: bool) -> FileHandle:
        handle = self._handles.get(path)
        if handle is not None:
            self._handles.move_to_end(path)
            return handle
        while len(self._handles) >= self._max_open_handles:
            _, evicted = self._handles.popitem(last=False)
            evicted.close()
        handle = self._fs.open(path, create=create)
        self._handles[path] = handle
        return handle


class ConsumeQueue:
    """The units of one topic/queue. Single writer (the dispatcher); readers may run
    concurrently: the end moves only after the units are buffered or written. Without a
    ``write_behind`` every append is written at once."""

    def __init__(
        self,
        fs: FileSystem,
        handles: FileHandleCache,
        root_dir: str,
        topic: str,
        queue_id: int,
        file_units: int,
        write_behind: WriteBehind | None = None,
    ) -> None:
        assert file_units >= 1
        self.topic = topic
        self.queue_id = queue_id
        self._fs = fs
        self._handles = handles
        self._directory = os.path.join(root_dir, CONSUME_QUEUE_DIR, topic, str(queue_id))
        self._file_units = file_units
        self._write_behind = write_behind
        # Start queue offsets of the files, ascending; never empty once a unit was written.
        self._file_starts: list[int] = []
        # Units from queue offset ``_written_end`` to ``_max_queue_offset``, not yet written.
        self._buffered = bytearray()
        self._written_end = 0
        self._max_queue_offset = 0
        # Guards the buffer against readers; reentrant because truncation searches by reading.
        self._lock = threading.RLock()
        self._load()

    @property
    def min_queue_offset(self) -> int:
        """The first queue offset still on disk (retention deletes whole files)."""
        starts = self._file_starts
        return starts[0] if starts else self._written_end

    @property
    def max_queue_offset(self) -> int:
        """The next queue offset to be written."""
        return self._max_queue_offset

    def append_units(self, first_queue_offset: int, units: bytes | bytearray) -> None:
        """Append encoded units, the first at ``first_queue_offset``, which must be the
        queue's end (queue offsets are dense). Buffered when the queue has a write-behind."""
        assert len(units) % UNIT_SIZE_BYTES == 0
        with self._lock:
            if first_queue_offset > self._max_queue_offset and self._is_empty():
                units = self._tombstones_before(first_queue_offset) + units
                first_queue_offset = self._max_queue_offset
            assert first_queue_offset == self._max_queue_offset, (
                f"{self.topic}/{self.queue_id}: unit for queue offset {first_queue_offset}, "
                f"expected {self._max_queue_offset}"
            )
            self._buffered += units
            self._max_queue_offset += len(units) // UNIT_SIZE_BYTES
        if self._write_behind is None:
            self.write_buffered()
        else:
            self._write_behind.added(self, len(units) // UNIT_SIZE_BYTES)

    def _is_empty(self) -> bool:
        return self._max_queue_offset == self.min_queue_offset

    def _tombstones_before(self, first_queue_offset: int) -> bytes:
        """Units for the queue offsets a rebuilt queue starts after (a replica that installed
        CommitLog segments whose oldest messages are not queue offset 0: retention deleted
        the earlier ones on the leader). They point at physical offset 0 with size 1, below
        any CommitLog that lost its first segment, so readers treat them exactly like the
        leader's units of deleted messages (OFFSET_TOO_SMALL); real records are never 1
        byte, and the files keep their aligned names. Only the first file's prefix is filled:
        the queue starts at that file."""
        if not self._file_starts:
            file_start = first_queue_offset - first_queue_offset % self._file_units
            self._max_queue_offset = self._written_end = file_start
        return _TOMBSTONE_UNIT * (first_queue_offset - self._max_queue_offset)

    def write_buffered(self) -> None:
        """Write the buffered units: one pwrite per file they fall in."""
        with self._lock:
            buffered = self._buffered
            queue_offset = self._written_end
            while queue_offset < self._max_queue_offset:
                file_start = queue_offset - queue_offset % self._file_units
                if not self._file_starts or self._file_starts[-1] != file_start:
                    self._create_file(file_start)
                chunk_end = min(file_start + self._file_units, self._max_queue_offset)
                first_byte = (queue_offset - self._written_end) * UNIT_SIZE_BYTES
                self._handles.pwrite(
                    self._path(file_start),
                    buffered[
                        first_byte : first_byte + (chunk_end - queue_offset) * UNIT_SIZE_BYTES
                    ],
                    (queue_offset - file_start) * UNIT_SIZE_BYTES,
                )
                queue_offset = chunk_end
            buffered.clear()
            self._written_end = queue_offset

    def read(self, queue_offset: int, max_units: int) -> list[ConsumeQueueUnit]:
        """Up to ``max_units`` units from ``queue_offset`` (clamped to what exists)."""
        with self._lock:
            queue_offset = max(queue_offset, self.min_queue_offset)
            end_queue_offset = min(queue_offset + max_units, self._max_queue_offset)
            # Buffered units are copied under the lock; written ones stay on disk for good
            # (only truncation and retention remove them), so they are read without it.
            written_end = self._written_end
            buffered_from = max(queue_offset, written_end)
            buffered = bytes(
                self._buffered[
                    (buffered_from - written_end) * UNIT_SIZE_BYTES : (
                        end_queue_offset - written_end
                    )
                    * UNIT_SIZE_BYTES
                ]
            )
        units = self._read_written(queue_offset, min(end_queue_offset, written_end))
        if buffered and queue_offset + len(units) == buffered_from:
            units.extend(map(ConsumeQueueUnit._make, _UNIT.iter_unpack(buffered)))
        return units

    def _read_written(self, queue_offset: int, end_queue_offset: int) -> list[ConsumeQueueUnit]:
        units: list[ConsumeQueueUnit] = []
        while queue_offset < end_queue_offset:
            file_start = queue_offset - queue_offset % self._file_units
            count = min(end_queue_offset, file_start + self._file_units) - queue_offset
            raw = self._handles.pread(
                self._path(file_start),
                count * UNIT_SIZE_BYTES,
                (queue_offset - file_start) * UNIT_SIZE_BYTES,
            )
            whole = len(raw) - len(raw) % UNIT_SIZE_BYTES
            units.extend(map(ConsumeQueueUnit._make, _UNIT.iter_unpack(raw[:whole])))
            if len(raw) < count * UNIT_SIZE_BYTES:
                break  # the file was deleted by retention meanwhile
            queue_offset += count
        return units

    def unit_at(self, queue_offset: int) -> ConsumeQueueUnit:
        """The unit at ``queue_offset``; InvalidOffsetError when there is none (past the end,
        or in a file retention deleted meanwhile)."""
        units = self.read(queue_offset, 1)
        if not units:
            raise InvalidOffsetError(
                f"{self.topic}/{self.queue_id} holds no unit at queue offset {queue_offset} "
                f"(it holds [{self.min_queue_offset}, {self._max_queue_offset}))"
            )
        return units[0]

    def queue_offset_for_physical_offset(self, physical_offset: int) -> int:
        """The first queue offset whose unit points at or past ``physical_offset``
        (``max_queue_offset`` when none does).

        After a crash the units past the last checkpoint may be missing, zeros or torn. Every
        unit written after a checkpoint points at or past its dispatched offset, and bytes a
        crash did not keep read as zeros (size 0), so counting a missing or zero-size unit as
        "at or past" keeps the search monotone: recovery finds the intact prefix."""
        low, high = self.min_queue_offset, self._max_queue_offset
        while low < high:
            middle = (low + high) // 2
            units = self.read(middle, 1)
            if units and units[0].size_bytes and units[0].physical_offset < physical_offset:
                low = middle + 1
            else:
                high = middle
        return low

    def queue_offset_for_time(
        self,
        timestamp_ms: int,
        first_queue_offset: int,
        store_timestamp_ms_of: Callable[[ConsumeQueueUnit], int],
    ) -> int:
        """The first queue offset at or after ``first_queue_offset`` whose message was stored at
        or after ``timestamp_ms`` (``max_queue_offset`` when none was). ``store_timestamp_ms_of``
        gives the store timestamp of the record a unit points at."""
        low, high = max(first_queue_offset, self.min_queue_offset), self._max_queue_offset
        while low < high:
            middle = (low + high) // 2
            if store_timestamp_ms_of(self.unit_at(middle)) < timestamp_ms:
                low = middle + 1
            else:
                high = middle
        return low

    def truncate_from_physical_offset(self, physical_offset: int) -> None:
        """Drop every unit pointing at or past ``physical_offset`` (a torn CommitLog tail, or
        a Raft truncation)."""
        with self._lock:
            keep_end = self.queue_offset_for_physical_offset(physical_offset)
            if keep_end == self._max_queue_offset:
                return
            self._max_queue_offset = keep_end
            if keep_end >= self._written_end:
                del self._buffered[(keep_end - self._written_end) * UNIT_SIZE_BYTES :]
                return
            self._buffered.clear()
            self._written_end = keep_end
            while self._file_starts and self._file_starts[-1] > keep_end:
                self._handles.remove(self._path(self._file_starts.pop()))
            if self._file_starts:
                file_start = self._file_starts[-1]
                self._handles.truncate(
                    self._path(file_start), (keep_end - file_start) * UNIT_SIZE_BYTES
                )
            self._fs.sync_dir(self._directory)

    def clear(self) -> None:
        """Drop every unit and file (a replica re-deriving its queues from installed
        segments); the next append may start at any queue offset."""
        with self._lock:
            for file_start in self._file_starts:
                self._handles.remove(self._path(file_start))
            if self._file_starts:
                self._fs.sync_dir(self._directory)
            self._file_starts = []
            self._buffered.clear()
            self._written_end = self._max_queue_offset = 0

    def delete_files_below(self, physical_offset: int) -> int:
        """Delete files (never the last) whose units all point below ``physical_offset``, the
        CommitLog's new first offset. Returns how many files were deleted."""
        deleted = 0
        with self._lock:
            while len(self._file_starts) > 1:
                next_start = self._file_starts[1]
                if self.unit_at(next_start - 1).physical_offset >= physical_offset:
                    break
                self._handles.remove(self._path(self._file_starts.pop(0)))
                deleted += 1
            if deleted:
                self._fs.sync_dir(self._directory)
        return deleted

    def _path(self, file_start: int) -> str:
        return os.path.join(self._directory, segment_file_name(file_start * UNIT_SIZE_BYTES))

    def _create_file(self, file_start: int) -> None:
        if not self._file_starts:
            self._fs.makedirs(self._directory)
        self._handles.truncate(self._path(file_start), 0)
        self._handles.mark_directory_dirty(self._directory)
        self._file_starts.append(file_start)

    def _load(self) -> None:
        names = [
            n for n in self._fs.listdir(self._directory) if parse_segment_file_name(n) is not None
        ]
        self._file_starts = [int(n) // UNIT_SIZE_BYTES for n in names]
        if not self._file_starts:
            return
        last_start = self._file_starts[-1]
        last_path = self._path(last_start)
        whole_units = min(self._fs.file_size(last_path) // UNIT_SIZE_BYTES, self._file_units)
        valid_units = self._count_leading_valid_units(last_path, whole_units)
        if valid_units * UNIT_SIZE_BYTES != self._fs.file_size(last_path):
            self._handles.truncate(last_path, valid_units * UNIT_SIZE_BYTES)
        self._max_queue_offset = self._written_end = last_start + valid_units

    def _count_leading_valid_units(self, path: str, whole_units: int) -> int:
        """``whole_units`` minus the trailing units a crash left as zeros (size 0 is never
        a real record), scanning back a chunk at a time."""
        chunk_units = 64
        end = whole_units
        while end > 0:
            start = max(0, end - chunk_units)
            raw = self._handles.pread(
                path, (end - start) * UNIT_SIZE_BYTES, start * UNIT_SIZE_BYTES
            )
            for index in range(end - start - 1, -1, -1):
                if decode_unit(raw, index * UNIT_SIZE_BYTES).size_bytes != 0:
                    return start + index + 1
            end = start
        return 0


def list_queues(fs: FileSystem, root_dir: str) -> list[tuple[str, int]]:
    """Every ``(topic, queue_id)`` with a ConsumeQueue directory, sorted."""
    base = os.path.join(root_dir, CONSUME_QUEUE_DIR)
    return [
        (topic, int(queue_name))
        for topic in fs.listdir(base)
        for queue_name in fs.listdir(os.path.join(base, topic))
        if queue_name.isdigit()
    ]
