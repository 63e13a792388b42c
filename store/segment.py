"""CommitLog segment files: their names and a bounded pool of open handles.

A segment is one fixed-size file under ``<root>/commitlog/`` named by the 20-digit
zero-padded physical offset of its first byte. This module knows nothing of records; the
CommitLog decides what goes where.

Rules this module keeps:
- Handles are opened lazily through the FileSystem and kept in an LRU of at most
  ``max_open_segments``; the least recently used idle handle is closed to make room.
- A handle in use is *pinned* and is never closed under its user (a reader's pread or the
  flusher's fsync); if every handle is pinned the pool runs over its bound until one is
  released, so the bound is exact whenever no more than ``max_open_segments`` operations are
  in flight.
- ``SegmentFiles._lock`` guards the LRU, the pin counts and each segment's handle; file I/O
  itself runs outside the lock.
- A segment that was removed (retention, truncation) is marked dropped: new uses fail with
  InvalidOffsetError, and its handle is closed when the last user releases it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from raftlog.store.errors import InvalidOffsetError, StoreClosedError
from raftlog.store.filesystem import FileHandle, FileSystem

SEGMENT_NAME_DIGITS = 20


def segment_file_name(start_offset: int) -> str:
    return f"{start_offset:0{SEGMENT_NAME_DIGITS}d}"


def parse_segment_file_name(name: str) -> int | None:
    """The start offset a segment file name encodes, or None for any other file."""
    if len(name) == SEGMENT_NAME_DIGITS and name.isascii() and name.isdigit():
        return int(name)
    return None


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What retention needs to know about one segment file."""

    start_offset: int
    path: str
    size_bytes: int
    # Store time of the newest message record in the segment (None when it holds none). Taken
    # from the data rather than the file's mtime: it survives copies and a simulated disk.
    last_modified_ms: int | None


class Segment:
    """One segment file. ``handle`` and ``pins`` belong to ``SegmentFiles`` (under its lock)."""

    __slots__ = ("dropped", "handle", "path", "pins", "start_offset")

    def __init__(self, start_offset: int, path: str) -> None:
        self.start_offset = start_offset
        self.path = path
        self.handle: FileHandle | None = None
        self.pins = 0
        self.dropped = False


class SegmentFiles:
    """The LRU of open segment handles (see the module rules)."""

    def __init__(self, fs: FileSystem, max_open_segments: int) -> None:
        if max_open_segments < 1:
            raise ValueError(f"max_open_segments must be at least 1, got {max_open_segments}")
        self._fs = fs
        self._max_open_segments = max_open_segments
        self._lock = threading.Lock()
        # Keyed by the Segment object: a truncated-away segment and its successor may share a
        # start offset while a reader still holds the old one.
        self._open: OrderedDict[Segment, None] = OrderedDict()
        self._closed = False

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    @contextmanager
    def use(self, segment: Segment, *, create: bool = False) -> Iterator[FileHandle]:
        """The segment's handle, pinned for the duration of the ``with`` block."""
        handle = self._pin(segment, create)
        try:
            yield handle
        finally:
            self._unpin(segment)

    def _pin(self, segment: Segment, create: bool) -> FileHandle:
        with self._lock:
            if self._closed:
                raise StoreClosedError("the commit log is closed")
            if segment.dropped:
                raise InvalidOffsetError(
                    f"segment {segment.path} was deleted (retention or truncation)"
                )
            handle = segment.handle
            if handle is None:
                # Make room first, so the bound holds even while this one opens.
                self._evict_idle(self._max_open_segments - 1)
                try:
                    handle = self._fs.open(segment.path, create=create)
                except FileNotFoundError as error:
                    raise InvalidOffsetError(f"segment {segment.path} is missing") from error
                segment.handle = handle
                self._open[segment] = None
            else:
                self._open.move_to_end(segment)
            segment.pins += 1
            return handle

    def _unpin(self, segment: Segment) -> None:
        with self._lock:
            segment.pins -= 1
            if segment.dropped and segment.pins == 0:
                self._close(segment)
            self._evict_idle(self._max_open_segments)

    def _evict_idle(self, limit: int) -> None:
        """Close least recently used idle handles until at most ``limit`` are open."""
        if len(self._open) <= limit:
            return
        for segment in list(self._open):
            if len(self._open) <= limit:
                return
            if segment.pins == 0:
                self._close(segment)

    def _close(self, segment: Segment) -> None:
        if segment.handle is not None:
            segment.handle.close()
            segment.handle = None
        self._open.pop(segment, None)

    def drop(self, segment: Segment) -> None:
        """The segment's file is being removed: refuse new uses, close when idle."""
        with self._lock:
            segment.dropped = True
            if segment.pins == 0:
                self._close(segment)

    def close_all(self) -> None:
        with self._lock:
            self._closed = True
            for segment in list(self._open):
                self._close(segment)
