"""The Raft index: where each log entry's envelope lies in the CommitLog (DLedger's index file).

Entry ``i``'s unit ``physical_offset(8) | size_bytes(4) | log_term(8)`` (big-endian,
``UNIT_SIZE_BYTES`` = 20) is at byte ``i * 20`` of the index, split into fixed files of
``units_per_file`` units named by the 20-digit byte position of their first unit, under
``<root>/raftindex/``. Lookup of any index is one pread; ``term(i)`` never touches the
CommitLog.

Rules this module keeps:
- Units exist for ``[first_index, last_index]`` only. ``first_index`` may be above 1 (after
  compaction or a snapshot): units below it are never read, and files wholly below it are
  deleted; a file's leading units below ``first_index`` are simply never written (sparse).
- The index is derived data. ``sync`` makes appended units durable (the storage calls it
  now and then, not on every Ready); truncation is durable when it returns, so no stale unit
  can come back after a crash. ``recover`` keeps the longest prefix of units that are placed
  exactly where the placement rule puts them (a lost page reads as zeros, a torn unit as
  garbage: both break the chain) and whose last unit matches its envelope's header, then
  rebuilds the tail by walking the CommitLog's envelopes.
- Entry placement is a pure function of the previous entry's end, the envelope size and the
  segment size (``next_entry_position``, the same rule as ``CommitLog.position_for``): this is
  what makes replicas that write the same entries in the same order byte-identical.
- An append the disk refuses part way is cut back, durably, before it raises (DiskFullError
  for a full device): the files never hold units past ``last_index``, whose value a reopen
  takes from the last file's size.
- All file I/O goes through the store's FileSystem; handles open lazily, at most
  ``_MAX_OPEN_FILES`` at once. Single writer.
"""

from __future__ import annotations

import errno
import struct
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from raftlog.node.replication.raft_entry import (
    CONF_ENTRY_MAGIC,
    ENTRY_HEADER_SIZE_BYTES,
    ENTRY_MAGIC,
    EntryHeader,
    decode_entry_header,
)
from raftlog.store.commit_log import CommitLog
from raftlog.store.errors import CorruptRecordError, DiskFullError, StoreError
from raftlog.store.filesystem import FileHandle, FileSystem
from raftlog.store.record import BLANK_MAGIC, BLANK_SIZE_BYTES
from raftlog.store.segment import parse_segment_file_name, segment_file_name

_UNIT = struct.Struct(">qiq")
UNIT_SIZE_BYTES = _UNIT.size
DEFAULT_UNITS_PER_FILE = 1 << 20
_MAX_OPEN_FILES = 4
# The newest units are also kept in memory: the core asks for recent terms all the time.
_TAIL_UNITS = 4096
_ITEM_HEAD = struct.Struct(">iI")


class IndexUnit(NamedTuple):
    physical_offset: int
    size_bytes: int
    log_term: int

    @property
    def end_physical_offset(self) -> int:
        return self.physical_offset + self.size_bytes


def next_entry_position(end_physical_offset: int, size_bytes: int, segment_size_bytes: int) -> int:
    """Where an envelope of ``size_bytes`` goes when the log ends at ``end_physical_offset``:
    right there, or at the next segment's start when it does not fit in the current one."""
    if not 0 < size_bytes <= segment_size_bytes:
        raise ValueError(
            f"an entry of {size_bytes} bytes does not fit a {segment_size_bytes}-byte segment"
        )
    in_segment = end_physical_offset % segment_size_bytes
    if in_segment + size_bytes <= segment_size_bytes:
        return end_physical_offset
    return end_physical_offset - in_segment + segment_size_bytes


class RaftIndex:
    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        first_index: int,
        units_per_file: int = DEFAULT_UNITS_PER_FILE,
    ) -> None:
        if first_index < 1 or units_per_file < 1:
            raise ValueError(f"first_index {first_index}, units_per_file {units_per_file}")
        self._fs = fs
        self._directory = directory
        self._units_per_file = units_per_file
        self._file_size_bytes = units_per_file * UNIT_SIZE_BYTES
        self._handles: OrderedDict[int, FileHandle] = OrderedDict()
        self._dirty: set[int] = set()
        self._dir_dirty = False
        fs.makedirs(directory)
        self._first_index = first_index
        self._last_index = first_index - 1
        # Units of [last_index + 1 - len(_tail), last_index]: always a suffix of the index.
        self._tail: list[IndexUnit] = []
        starts = sorted(
            start
            for start in map(parse_segment_file_name, fs.listdir(directory))
            if start is not None
        )
        if starts:
            last_start = starts[-1]
            size = min(fs.file_size(self._path(last_start)), self._file_size_bytes)
            self._last_index = max(first_index - 1, (last_start + size) // UNIT_SIZE_BYTES - 1)
        self.compact_to(first_index)

    # ----------------------------------------------------------------- shape

    @property
    def first_index(self) -> int:
        return self._first_index

    @property
    def last_index(self) -> int:
        return self._last_index

    def _path(self, file_start: int) -> str:
        return f"{self._directory}/{segment_file_name(file_start)}"

    def _file_start(self, log_index: int) -> int:
        return log_index // self._units_per_file * self._file_size_bytes

    def _handle(self, file_start: int, create: bool = False) -> FileHandle:
        handle = self._handles.get(file_start)
        if handle is not None:
            self._handles.move_to_end(file_start)
            return handle
        while len(self._handles) >= _MAX_OPEN_FILES:
            oldest = next(iter(self._handles))
            if oldest in self._dirty:
                # Sync before closing: a dirty file's pages must not be forgotten by sync().
                self._handles[oldest].sync()
                self._dirty.discard(oldest)
            self._handles.pop(oldest).close()
        path = self._path(file_start)
        if create and not self._fs.exists(path):
            self._dir_dirty = True
        handle = self._fs.open(path, create=create)
        self._handles[file_start] = handle
        return handle

    # ----------------------------------------------------------------- reading

    def unit(self, log_index: int) -> IndexUnit:
        if not self._first_index <= log_index <= self._last_index:
            raise IndexError(
                f"log index {log_index} outside [{self._first_index}, {self._last_index}]"
            )
        return self.units(log_index, log_index + 1)[0]

    @property
    def _tail_first_index(self) -> int:
        return self._last_index + 1 - len(self._tail)

    def units(self, low: int, high: int) -> list[IndexUnit]:
        """The units of ``[low, high)``, which must lie in ``[first_index, last_index]``."""
        if not self._first_index <= low <= high <= self._last_index + 1:
            raise IndexError(
                f"log indexes [{low}, {high}) outside [{self._first_index}, {self._last_index}]"
            )
        tail_first_index = self._tail_first_index
        if low >= tail_first_index:
            return self._tail[low - tail_first_index : high - tail_first_index]
        found: list[IndexUnit] = []
        for file_start, position, count in self._spans(low, high):
            data = self._handle(file_start).pread(count * UNIT_SIZE_BYTES, position)
            if len(data) != count * UNIT_SIZE_BYTES:
                raise CorruptRecordError(
                    f"raft index file {self._path(file_start)} ends before unit {low + len(found)}"
                )
            found.extend(IndexUnit._make(fields) for fields in _UNIT.iter_unpack(data))
        return found

    def _spans(self, low: int, high: int) -> Iterator[tuple[int, int, int]]:
        """``(file_start, position in file, unit count)`` covering ``[low, high)``."""
        log_index = low
        while log_index < high:
            file_start = self._file_start(log_index)
            file_first = file_start // UNIT_SIZE_BYTES
            count = min(high, file_first + self._units_per_file) - log_index
            yield file_start, (log_index - file_first) * UNIT_SIZE_BYTES, count
            log_index += count

    # ----------------------------------------------------------------- writing

    def append(self, first_log_index: int, units: Sequence[IndexUnit]) -> None:
        """Write ``units`` for ``first_log_index`` on, which must be ``last_index + 1``."""
        assert first_log_index == self._last_index + 1, (
            f"index append at {first_log_index}, last index is {self._last_index}"
        )
        done = 0
        try:
            for file_start, position, count in self._spans(
                first_log_index, first_log_index + len(units)
            ):
                data = b"".join(_UNIT.pack(*unit) for unit in units[done : done + count])
                self._handle(file_start, create=True).pwrite(data, position)
                self._dirty.add(file_start)
                done += count
        except OSError as error:
            # A full disk part way: the file size says where the index ends when it is
            # opened again, so what was written of these units goes, durably.
            self._cut_from(first_log_index)
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(
                    f"no space left on the device for the raft index ({error.strerror or error}):"
                    f" none of entries {first_log_index}..{first_log_index + len(units) - 1} "
                    "was written, and writes resume once space is freed"
                ) from error
            raise
        self._last_index += len(units)
        self._tail.extend(units)
        if len(self._tail) > 2 * _TAIL_UNITS:
            del self._tail[:-_TAIL_UNITS]

    def sync(self) -> None:
        """Make every appended unit durable."""
        for file_start in sorted(self._dirty):
            self._handle(file_start).sync()
        self._dirty.clear()
        if self._dir_dirty:
            self._fs.sync_dir(self._directory)
            self._dir_dirty = False

    def truncate_from(self, log_index: int) -> None:
        """Drop the units of ``log_index`` and after, durably."""
        if log_index > self._last_index:
            return
        assert log_index >= self._first_index, (log_index, self._first_index)
        self._cut_from(log_index)
        del self._tail[max(0, log_index - self._tail_first_index) :]
        self._last_index = log_index - 1

    def _cut_from(self, log_index: int) -> None:
        """Remove, durably, every byte of the index files from ``log_index``'s unit on."""
        keep_start = self._file_start(log_index)
        doomed = [start for start in self._file_starts() if start > keep_start]
        for file_start in reversed(doomed):
            self._remove_file(file_start)
        position = log_index * UNIT_SIZE_BYTES - keep_start
        if self._fs.exists(self._path(keep_start)):
            handle = self._handle(keep_start)
            if handle.size() > position:
                handle.truncate(position)
                handle.sync()
        if doomed:
            self._fs.sync_dir(self._directory)

    def compact_to(self, first_index: int) -> None:
        """Forget the units below ``first_index`` (deleting files wholly below it); an index
        above ``last_index + 1`` empties the index and makes it start there."""
        if first_index > self._last_index + 1:
            self.truncate_from(self._first_index)
            self._last_index = first_index - 1
        self._first_index = max(self._first_index, first_index)
        del self._tail[: max(0, self._first_index - self._tail_first_index)]
        first_file = self._file_start(self._first_index)
        doomed = [start for start in self._file_starts() if start < first_file]
        for file_start in doomed:
            self._remove_file(file_start)
        if doomed:
            self._fs.sync_dir(self._directory)

    def reset(self, first_index: int) -> None:
        """Drop every unit; the index restarts empty at ``first_index`` (a snapshot)."""
        self.truncate_from(self._first_index)
        self._first_index = first_index
        self._last_index = first_index - 1
        self._tail.clear()
        for file_start in self._file_starts():
            self._remove_file(file_start)
        self._fs.sync_dir(self._directory)

    def _file_starts(self) -> list[int]:
        return sorted(
            start
            for start in map(parse_segment_file_name, self._fs.listdir(self._directory))
            if start is not None
        )

    def _remove_file(self, file_start: int) -> None:
        handle = self._handles.pop(file_start, None)
        if handle is not None:
            handle.close()
        self._dirty.discard(file_start)
        self._fs.remove(self._path(file_start))

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()
        self._dirty.clear()

    # ----------------------------------------------------------------- recovery

    def recover(self, commit_log: CommitLog, base_end_offset: int, base_term: int) -> None:
        """Make the index agree with a recovered ``commit_log`` whose first entry (index
        ``first_index``) follows ``base_end_offset`` and whose snapshot point has
        ``base_term``: keep the longest prefix of units that are well placed and confirmed by
        the envelope headers, drop the rest, and index every later envelope of the log."""
        segment_size_bytes = commit_log.segment_size_bytes
        max_offset = commit_log.max_offset
        good_index = self._first_index - 1
        end_offset, term = base_end_offset, base_term
        for log_index, unit in zip(
            range(self._first_index, self._last_index + 1), self._iter_units(), strict=False
        ):
            if (
                unit.size_bytes < ENTRY_HEADER_SIZE_BYTES
                or unit.log_term < term
                or unit.end_physical_offset > max_offset
                or unit.physical_offset
                != next_entry_position(end_offset, unit.size_bytes, segment_size_bytes)
            ):
                break
            good_index, end_offset, term = log_index, unit.end_physical_offset, unit.log_term
        # Placement proves structure; the last unit is also checked against the CommitLog's
        # header, walking back while they disagree (appends past the last sync may be lost).
        while good_index >= self._first_index:
            unit = self.unit(good_index)
            header = _header_at(commit_log, unit.physical_offset)
            if header is not None and (header.log_index, header.log_term, header.total_size) == (
                good_index,
                unit.log_term,
                unit.size_bytes,
            ):
                end_offset = unit.end_physical_offset
                break
            good_index -= 1
        else:
            end_offset = base_end_offset
        self.truncate_from(good_index + 1)
        rebuilt: list[IndexUnit] = []
        for position, header in iter_entry_headers(commit_log, end_offset, max_offset):
            expected = self._last_index + 1 + len(rebuilt)
            if header.log_index != expected:
                raise CorruptRecordError(
                    f"the entry at physical offset {position} has log index {header.log_index}, "
                    f"expected {expected}"
                )
            rebuilt.append(IndexUnit(position, header.total_size, header.log_term))
        if rebuilt:
            self.append(self._last_index + 1, rebuilt)
        self.sync()

    def _iter_units(self) -> Iterator[IndexUnit]:
        """Every unit in ``[first_index, last_index]``, read a file at a time (bounded by the
        file size, not the log length)."""
        for file_start, position, count in self._spans(self._first_index, self._last_index + 1):
            if not self._fs.exists(self._path(file_start)):
                return
            data = self._handle(file_start).pread(count * UNIT_SIZE_BYTES, position)
            whole = len(data) - len(data) % UNIT_SIZE_BYTES
            yield from (IndexUnit._make(fields) for fields in _UNIT.iter_unpack(data[:whole]))
            if len(data) != count * UNIT_SIZE_BYTES:
                return  # a short file: what follows is missing, the caller cuts there


def _header_at(commit_log: CommitLog, physical_offset: int) -> EntryHeader | None:
    try:
        return decode_entry_header(commit_log.read(physical_offset, ENTRY_HEADER_SIZE_BYTES))
    except StoreError:  # outside the log, or no entry header there
        return None


def iter_entry_headers(
    commit_log: CommitLog, start: int, end: int
) -> Iterator[tuple[int, EntryHeader]]:
    """``(physical_offset, header)`` of every entry envelope in ``[start, end)`` of a recovered
    CommitLog, crossing end-of-segment blanks. A plain record (not in an envelope) is an
    error: in a Raft store every item is an entry."""
    segment_size_bytes = commit_log.segment_size_bytes
    if start < min(end, commit_log.min_offset):
        raise CorruptRecordError(
            f"entries from physical offset {start} must be indexed, but retention deleted the "
            f"commit log below {commit_log.min_offset} (compact before retention)"
        )
    position = start
    while position < end:
        segment_end = position - position % segment_size_bytes + segment_size_bytes
        if segment_end - position < BLANK_SIZE_BYTES:
            position = segment_end
            continue
        _, magic = _ITEM_HEAD.unpack(commit_log.read(position, _ITEM_HEAD.size))
        if magic == BLANK_MAGIC:
            position = segment_end
            continue
        if magic not in (ENTRY_MAGIC, CONF_ENTRY_MAGIC):
            raise CorruptRecordError(
                f"the item at physical offset {position} (magic {magic:#010x}) is no Raft entry"
            )
        header = decode_entry_header(commit_log.read(position, ENTRY_HEADER_SIZE_BYTES))
        yield position, header
        position += header.total_size
