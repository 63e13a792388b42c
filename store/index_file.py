"""IndexFile: persistent hash tables from ``topic#key`` to physical offsets (docs/store-format.md).

One file per period under ``<root>/index/<20-digit creation timestamp ms>``:
header(40) = begin_timestamp(8) | end_timestamp(8) | begin_phy_offset(8) | end_phy_offset(8) |
hash_slot_count(4) | index_count(4); then ``slot_count`` 4-byte slots (the newest entry number in
the slot, 0 = empty); then ``entry_count`` 20-byte entries key_hash(4) | phy_offset(8) |
time_diff_seconds(4) | prev_index(4) (0 = end of chain). Integers big-endian.

Rules this module keeps:
- As in RocketMQ, entry number 0 is never used (0 ends a chain), so ``index_count`` starts at 1
  and a file holds ``entry_count - 1`` entries. ``hash_slot_count`` holds the file's configured
  slot count, so a file stays readable whatever the current configuration says.
- Entries are appended in dispatch order, so their physical offsets ascend within a file and
  across files (oldest file first). Truncation and retention rely on it.
- The writable (newest) file keeps its slot table in memory: a put is one positional write of
  the new entries; dirty slots and the header go to disk on ``flush``, entries first, then the
  header, each step fsynced, so a header on disk never counts an entry that is not durable.
- Recovery (``recover``) trusts the entries a durable header counts, drops those at or past the
  first undispatched physical offset, and rebuilds the newest file's slot table from its kept
  entries: slots are written before the header, so after a crash they may be stale or point
  at entries that never became durable. It costs one sequential read of that file's entries.
- Older files are read-only; all I/O goes through the shared ``FileHandleCache``.
- Hashes collide and windows are second-grained: ``query`` returns candidates; the caller
  re-checks the real key (and time) in the record.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from array import array
from collections.abc import Callable

from raftlog.store.consume_queue import FileHandleCache
from raftlog.store.filesystem import FileSystem
from raftlog.store.hashing import key_hash

INDEX_DIR = "index"
HEADER_SIZE_BYTES = 40
SLOT_SIZE_BYTES = 4
ENTRY_SIZE_BYTES = 20
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")
_FIRST_ENTRY = 1
_MS_PER_SECOND = 1000
_FILE_NAME_DIGITS = 20
# Dirty slots beyond this share are written as one whole-table write instead of one each.
_WHOLE_TABLE_WRITE_RATIO = 64
_SLOTS_PER_PAGE = 1024
# Entries read per chunk when rebuilding a slot table.
_REBUILD_CHUNK_ENTRIES = 65536
assert _HEADER.size == HEADER_SIZE_BYTES and _ENTRY.size == ENTRY_SIZE_BYTES

IndexPut = tuple[int, int, int]
"""``(key_hash, physical_offset, store_timestamp_ms)`` of one entry to add."""


def _to_big_endian(table: array[int]) -> bytes:
    if sys.byteorder == "little":
        swapped = array("i", table)
        swapped.byteswap()
        return swapped.tobytes()
    return table.tobytes()


def _page_runs(slots: set[int], slot_count: int) -> list[tuple[int, int]]:
    """``[first, end)`` slot ranges covering every page of ``_SLOTS_PER_PAGE`` slots that
    holds one of ``slots``, neighbouring pages merged."""
    runs: list[tuple[int, int]] = []
    for page in sorted({slot // _SLOTS_PER_PAGE for slot in slots}):
        first = page * _SLOTS_PER_PAGE
        end = min(first + _SLOTS_PER_PAGE, slot_count)
        if runs and runs[-1][1] == first:
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((first, end))
    return runs


def _from_big_endian(raw: bytes) -> array[int]:
    table = array("i", raw)
    if sys.byteorder == "little":
        table.byteswap()
    return table


class IndexFile:
    """One index file. Only the newest file of an ``IndexService`` is written to."""

    def __init__(self, handles: FileHandleCache, path: str, slot_count: int, entry_count: int):
        self.path = path
        self._handles = handles
        self.slot_count = slot_count
        self.entry_count = entry_count
        self.begin_timestamp_ms = 0
        self.end_timestamp_ms = 0
        self.begin_physical_offset = 0
        self.end_physical_offset = 0
        self.index_count = _FIRST_ENTRY
        # Loaded only while the file is writable.
        self._slots: array[int] | None = None
        self._dirty_slots: set[int] = set()
        self._header_dirty = False

    @classmethod
    def create(
        cls, handles: FileHandleCache, path: str, slot_count: int, entry_count: int
    ) -> IndexFile:
        assert slot_count >= 1 and entry_count >= 2
        index_file = cls(handles, path, slot_count, entry_count)
        # Sized up front: slots and entries read as zeros until written.
        handles.truncate(path, index_file._entry_position(entry_count))
        index_file._slots = array("i", bytes(SLOT_SIZE_BYTES * slot_count))
        index_file._header_dirty = True
        return index_file

    @classmethod
    def open(cls, handles: FileHandleCache, path: str, file_size_bytes: int) -> IndexFile | None:
        """The file at ``path``, or None when its header was never written (a crash right
        after the file was created) or does not fit the file's size."""
        raw = handles.pread(path, HEADER_SIZE_BYTES, 0)
        if len(raw) < HEADER_SIZE_BYTES:
            return None
        begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = _HEADER.unpack(raw)
        entry_count = (
            file_size_bytes - HEADER_SIZE_BYTES - SLOT_SIZE_BYTES * slot_count
        ) // ENTRY_SIZE_BYTES
        if slot_count < 1 or entry_count < 2 or not _FIRST_ENTRY <= index_count <= entry_count:
            return None
        index_file = cls(handles, path, slot_count, entry_count)
        index_file.begin_timestamp_ms, index_file.end_timestamp_ms = begin_ts, end_ts
        index_file.begin_physical_offset, index_file.end_physical_offset = begin_phy, end_phy
        index_file.index_count = index_count
        return index_file

    @property
    def is_empty(self) -> bool:
        return self.index_count == _FIRST_ENTRY

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.entry_count

    def make_writable(self) -> None:
        """Load the slot table so this file can take puts."""
        if self._slots is None:
            raw = self._handles.pread(
                self.path, SLOT_SIZE_BYTES * self.slot_count, HEADER_SIZE_BYTES
            )
            self._slots = _from_big_endian(raw)

    def put_batch(self, puts: list[IndexPut], start: int) -> int:
        """Append ``puts[start:]`` until the file is full; returns how many were taken."""
        slots = self._slots
        assert slots is not None, "put into a read-only index file"
        taken = min(len(puts) - start, self.entry_count - self.index_count)
        if taken <= 0:
            return 0
        if self.is_empty:
            self.begin_timestamp_ms = puts[start][2]
            self.begin_physical_offset = puts[start][1]
        begin_ts = self.begin_timestamp_ms
        slot_count = self.slot_count
        dirty = self._dirty_slots
        first_index = index = self.index_count
        encoded = bytearray()
        pack = _ENTRY.pack
        mark_dirty = dirty.add
        for hash_value, physical_offset, timestamp_ms in puts[start : start + taken]:
            slot = hash_value % slot_count
            # A clock step back must not make a negative (wrapped) time difference.
            time_diff_s = (
                (timestamp_ms - begin_ts) // _MS_PER_SECOND if timestamp_ms > begin_ts else 0
            )
            encoded += pack(hash_value, physical_offset, time_diff_s, slots[slot])
            slots[slot] = index
            mark_dirty(slot)
            index += 1
        self._handles.pwrite(self.path, encoded, self._entry_position(first_index))
        last = puts[start + taken - 1]
        self.end_physical_offset, self.end_timestamp_ms = (
            last[1],
            max(self.end_timestamp_ms, last[2]),
        )
        self.index_count = index
        self._header_dirty = True
        return taken

    def query(
        self, hash_value: int, begin_ms: int, end_ms: int, max_results: int, found: list[int]
    ) -> None:
        """Append to ``found`` (up to ``max_results`` in all) the physical offsets of entries
        with ``hash_value`` whose second-grained time may lie in ``[begin_ms, end_ms]``, newest
        first."""
        if self.is_empty or self.end_timestamp_ms < begin_ms - _MS_PER_SECOND:
            return
        if self.begin_timestamp_ms > end_ms:
            return
        slot = hash_value % self.slot_count
        if self._slots is not None:
            index = self._slots[slot]
        else:
            raw = self._handles.pread(
                self.path, SLOT_SIZE_BYTES, HEADER_SIZE_BYTES + SLOT_SIZE_BYTES * slot
            )
            index = _SLOT.unpack(raw)[0]
        steps_left = self.index_count
        while _FIRST_ENTRY <= index < self.index_count and len(found) < max_results:
            steps_left -= 1
            assert steps_left >= 0, f"{self.path}: index chain loops"
            raw = self._handles.pread(self.path, ENTRY_SIZE_BYTES, self._entry_position(index))
            entry_hash, physical_offset, time_diff_s, prev_index = _ENTRY.unpack(raw)
            entry_ms = self.begin_timestamp_ms + time_diff_s * _MS_PER_SECOND
            if entry_ms + _MS_PER_SECOND <= begin_ms:
                break  # chains run newest first: everything further is older still
            if entry_hash == hash_value and entry_ms <= end_ms:
                found.append(physical_offset)
            assert prev_index < index, f"{self.path}: entry {index} chains forward to {prev_index}"
            index = prev_index

    def first_entry_at_or_past(self, physical_offset: int) -> int:
        """The first entry number whose physical offset is >= ``physical_offset``."""
        low, high = _FIRST_ENTRY, self.index_count
        while low < high:
            middle = (low + high) // 2
            if self._entry(middle)[1] < physical_offset:
                low = middle + 1
            else:
                high = middle
        return low

    def truncate_and_rebuild_slots(self, keep_index_count: int) -> None:
        """Keep entries below ``keep_index_count``, rebuild the slot table from them and
        persist; the file becomes writable."""
        assert _FIRST_ENTRY <= keep_index_count <= self.index_count
        slots = array("i", bytes(SLOT_SIZE_BYTES * self.slot_count))
        slot_count = self.slot_count
        last_timestamp_ms = self.begin_timestamp_ms
        last_physical_offset = self.begin_physical_offset
        index = _FIRST_ENTRY
        while index < keep_index_count:
            count = min(_REBUILD_CHUNK_ENTRIES, keep_index_count - index)
            raw = self._handles.pread(
                self.path, count * ENTRY_SIZE_BYTES, self._entry_position(index)
            )
            for hash_value, physical_offset, time_diff_s, _ in _ENTRY.iter_unpack(raw):
                slots[hash_value % slot_count] = index
                last_physical_offset = physical_offset
                last_timestamp_ms = max(
                    last_timestamp_ms, self.begin_timestamp_ms + time_diff_s * _MS_PER_SECOND
                )
                index += 1
        self._slots = slots
        self.index_count = keep_index_count
        if self.is_empty:
            self.begin_timestamp_ms = self.end_timestamp_ms = 0
            self.begin_physical_offset = self.end_physical_offset = 0
        else:
            self.end_timestamp_ms, self.end_physical_offset = (
                last_timestamp_ms,
                last_physical_offset,
            )
        self._dirty_slots = set(range(self.slot_count))
        self._header_dirty = True
        self.flush()

    def flush(self) -> None:
        """Make the entries, slots and header durable, in that order."""
        if not self._header_dirty:
            return
        if self._dirty_slots:
            self._write_dirty_slots()
        self._handles.sync(self.path)
        self._handles.pwrite(
            self.path,
            _HEADER.pack(
                self.begin_timestamp_ms,
                self.end_timestamp_ms,
                self.begin_physical_offset,
                self.end_physical_offset,
                self.slot_count,
                self.index_count,
            ),
            0,
        )
        self._handles.sync(self.path)
        self._header_dirty = False

    def make_read_only(self) -> None:
        self.flush()
        self._slots = None

    def _write_dirty_slots(self) -> None:
        slots = self._slots
        assert slots is not None
        if len(self._dirty_slots) * _WHOLE_TABLE_WRITE_RATIO > self.slot_count:
            self._handles.pwrite(self.path, _to_big_endian(slots), HEADER_SIZE_BYTES)
        else:
            # One write per run of touched 4 KiB pages of the table, not one per slot: under
            # load most dirty slots sit on distinct pages anyway, and a syscall per 4-byte
            # slot cost a slave a fifth of its time in checkpoints.
            for first, end in _page_runs(self._dirty_slots, self.slot_count):
                self._handles.pwrite(
                    self.path,
                    _to_big_endian(slots[first:end]),
                    HEADER_SIZE_BYTES + SLOT_SIZE_BYTES * first,
                )
        self._dirty_slots = set()

    def _entry(self, index: int) -> tuple[int, int, int, int]:
        raw = self._handles.pread(self.path, ENTRY_SIZE_BYTES, self._entry_position(index))
        hash_value, physical_offset, time_diff_s, prev_index = _ENTRY.unpack(raw)
        return hash_value, physical_offset, time_diff_s, prev_index

    def _entry_position(self, index: int) -> int:
        return HEADER_SIZE_BYTES + SLOT_SIZE_BYTES * self.slot_count + ENTRY_SIZE_BYTES * index


class IndexService:
    """All index files of a store: puts go to the newest, which rolls when full; queries walk
    files newest to oldest. Thread-safe (one lock)."""

    def __init__(
        self,
        fs: FileSystem,
        handles: FileHandleCache,
        root_dir: str,
        slot_count: int,
        entry_count: int,
        now_ms: Callable[[], int],
    ) -> None:
        if slot_count < 1 or entry_count < 2:
            raise ValueError(
                f"an index file needs >= 1 slot and >= 2 entries (entry 0 is reserved), got "
                f"{slot_count} slots and {entry_count} entries"
            )
        self._fs = fs
        self._handles = handles
        self._directory = os.path.join(root_dir, INDEX_DIR)
        self._slot_count = slot_count
        self._entry_count = entry_count
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self._files: list[IndexFile] = []
        fs.makedirs(self._directory)
        for name in fs.listdir(self._directory):
            if len(name) == _FILE_NAME_DIGITS and name.isdigit():
                path = os.path.join(self._directory, name)
                index_file = IndexFile.open(handles, path, fs.file_size(path))
                if index_file is None:
                    # Its header never became durable, so no checkpoint counted its entries:
                    # recovery re-dispatches them into a new file.
                    handles.remove(path)
                    fs.sync_dir(self._directory)
                else:
                    self._files.append(index_file)

    @property
    def file_count(self) -> int:
        return len(self._files)

    def put(self, hash_value: int, physical_offset: int, store_timestamp_ms: int) -> None:
        """Add one entry (``hashing.key_hash`` of topic and key); see ``put_batch``."""
        self.put_batch([(hash_value, physical_offset, store_timestamp_ms)])

    def put_batch(self, puts: list[IndexPut]) -> None:
        """Add entries, in ascending physical offset order."""
        with self._lock:
            done = 0
            while done < len(puts):
                done += self._writable_file().put_batch(puts, done)

    def query(
        self, topic: str, key: str, begin_ms: int, end_ms: int, max_results: int
    ) -> list[int]:
        """Candidate physical offsets for ``topic``/``key`` stored within
        ``[begin_ms, end_ms]``, newest first; the caller re-checks key and time."""
        hash_value = key_hash(topic, key)
        found: list[int] = []
        with self._lock:
            for index_file in reversed(self._files):
                if len(found) >= max_results:
                    break
                index_file.query(hash_value, begin_ms, end_ms, max_results, found)
        return found

    def flush(self) -> None:
        with self._lock:
            if self._files:
                self._files[-1].flush()

    def recover(self, physical_offset: int) -> None:
        """Drop every entry at or past ``physical_offset`` (entries the CommitLog no longer
        backs, or that dispatch will add again) and rebuild the newest file's slot table."""
        with self._lock:
            while self._files:
                newest = self._files[-1]
                keep = newest.first_entry_at_or_past(physical_offset)
                if keep == _FIRST_ENTRY and len(self._files) > 1:
                    self._remove_newest()
                    continue
                newest.truncate_and_rebuild_slots(keep)
                break

    def truncate_from(self, physical_offset: int) -> None:
        """Drop entries at or past ``physical_offset`` (a Raft truncation of the tail)."""
        with self._lock:
            if not self._files or self._files[-1].end_physical_offset < physical_offset:
                return
        self.recover(physical_offset)

    def delete_files_below(self, physical_offset: int) -> int:
        """Delete files (never the newest) whose entries all point below ``physical_offset``.
        Returns how many were deleted."""
        deleted = 0
        with self._lock:
            while len(self._files) > 1 and self._files[0].end_physical_offset < physical_offset:
                self._handles.remove(self._files.pop(0).path)
                deleted += 1
            if deleted:
                self._fs.sync_dir(self._directory)
        return deleted

    def _remove_newest(self) -> None:
        self._handles.remove(self._files.pop().path)
        self._fs.sync_dir(self._directory)

    def _writable_file(self) -> IndexFile:
        if self._files and not self._files[-1].is_full:
            newest = self._files[-1]
            newest.make_writable()
            return newest
        if self._files:
            self._files[-1].make_read_only()
        created_ms = self._now_ms()
        if self._files:
            # Names must ascend even if the clock does not.
            created_ms = max(created_ms, int(os.path.basename(self._files[-1].path)) + 1)
        path = os.path.join(self._directory, f"{created_ms:0{_FILE_NAME_DIGITS}d}")
        index_file = IndexFile.create(self._handles, path, self._slot_count, self._entry_count)
        index_file.flush()
        self._fs.sync_dir(self._directory)
        self._files.append(index_file)
        return index_file
