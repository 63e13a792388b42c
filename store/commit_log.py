"""The CommitLog: one sequential log of every topic's records, in fixed-size segment files.

A physical offset is a byte position in the whole log; segment ``k`` holds
``[k * segment_size_bytes, (k + 1) * segment_size_bytes)`` in the file
``<directory>/<20-digit start offset>``. Files grow as data is written (no preallocation);
recovery still treats zeros or garbage past the valid end as a torn tail.

Items. The log is a sequence of *items*, each starting ``total_size(4) | magic(4)``:
- a message record (``MESSAGE_MAGIC``, record.py);
- an end-of-segment blank (``BLANK_MAGIC``): ``total_size`` is the bytes left to the segment's
  end; readers jump to the next segment. When fewer than ``BLANK_SIZE_BYTES`` are left there is
  no room for a blank and the segment's end is implicit;
- an *envelope*: a kind of item a caller registers (``Envelope``) without the store knowing
  what it means. ``total_size`` covers the envelope's header (``header_size_bytes``, counted
  from the item's first byte) and the message records nested after it, which must fill the
  payload exactly. ``scan`` steps into the payload; ``recover`` calls ``verify(item bytes)``
  and treats False as the torn tail. This is how a Raft layer can wrap each log entry (term,
  index, a CRC of the entry) around the records it replicates while the store stays ignorant
  of Raft. Every nested record's physical_offset field must name where it actually lies.

Rules this module keeps:
- Single writer: ``append``, ``truncate_after``, ``recover``, ``delete_segment`` and
  ``close`` are called by one thread at a time (the store's writer). ``flush`` may run at the
  same time on another thread, and readers (``read``, ``read_record``, ``scan``,
  ``segments``) on any thread.
- ``_lock`` guards the segment table (``_segments``, ``_by_start``, ``_timestamps``) and the
  offsets (``_max_offset``, ``_flushed_offset``, ``_truncation_epoch``, ``_dir_dirty``);
  ``_flush_lock`` lets one ``flush`` run at a time. File I/O runs outside both, on pinned
  handles (segment.py), so an fsync never blocks an append.
- A block never straddles segments; a write is published (``max_offset``) only after its
  bytes are written, so readers never see a half-written item.
- An append the disk refuses part way (ENOSPC after some bytes, EIO) leaves nothing of itself:
  what it wrote is cut back, durably, and a segment file it created is removed, before it
  raises (DiskFullError for a full device). So the next append starts where the refused one
  did, and no whole record of a refused block can come back in recovery.
- ``flush`` reads ``max_offset`` *before* fsyncing and publishes it as ``flushed_offset`` only
  after every fsync (and the directory sync for new segment files) succeeded, and only if no
  truncation happened meanwhile. A failed fsync is sticky (FlushFailedError forever after):
  after a failed fsync the kernel may have dropped the dirty pages, so a later "successful"
  fsync would be a lie.
- ``on_fsync``, when set, is called with the seconds each successful flush spent syncing (the
  node's fsync latency metric): once per flush that had something to sync, outside ``_lock``.
- Truncation (``truncate_after``, ``recover``) is durable before it returns, and removes later
  segments newest first, so whatever a crash leaves is a prefix of the log.

Integrity. Reads verify what they return: ``read_record`` checks structure, the body CRC, the
record CRC trailer (required by default, see record.py) and that the record's physical_offset
field equals its position; so any single-byte change of a stored record is refused, never
returned as a valid message. ``recover`` applies the same checks to every item from the safe
offset on. ``scan`` checks item structure only: it feeds the dispatcher with bytes that were
verified when this node wrote or recovered them. ``read_record_bytes`` (the fast pull) checks
only that each record is where and as long as its unit says; its reader checks the CRCs.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from raftlog.store.errors import (
    CorruptRecordError,
    DiskFullError,
    FlushFailedError,
    InvalidOffsetError,
)
from raftlog.store.filesystem import FileSystem
from raftlog.store.record import (
    BLANK_MAGIC,
    BLANK_SIZE_BYTES,
    MESSAGE_MAGIC,
    MessageRecord,
    cut_records,
    decode_record,
    encode_blank,
    read_store_timestamp_ms,
    verify_record,
)
from raftlog.store.segment import (
    Segment,
    SegmentFiles,
    SegmentInfo,
    parse_segment_file_name,
    segment_file_name,
)

_ITEM_HEAD = struct.Struct(">iI")
_ITEM_HEAD_BYTES = _ITEM_HEAD.size
# Scans read this much at a time (an item larger than this is read whole).
_SCAN_CHUNK_BYTES = 1 << 20
# read_record's first guess at a record's size; most records need one pread.
_RECORD_READ_GUESS_BYTES = 4096
# read_records reads neighbouring records with one pread while the span stays below this and
# the bytes between two of them (other queues' records) below the gap.
_READ_RUN_MAX_BYTES = 1 << 20
_READ_RUN_MAX_GAP_BYTES = 16 << 10
MIN_SEGMENT_SIZE_BYTES = 64


@dataclass(frozen=True, slots=True)
class Envelope:
    """A caller-defined item kind (see the module docstring). ``header_size_bytes`` counts
    from the item's first byte, so it includes total_size and magic."""

    magic: int
    header_size_bytes: int
    verify: Callable[[memoryview], bool]


class _InvalidItem(CorruptRecordError):
    """The bytes at ``physical_offset`` do not form a well-formed item."""

    def __init__(self, physical_offset: int, reason: str) -> None:
        super().__init__(f"commit log at physical offset {physical_offset}: {reason}")
        self.physical_offset = physical_offset


class CommitLog:
    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        segment_size_bytes: int = 1 << 30,
        max_open_segments: int = 64,
        envelopes: Sequence[Envelope] = (),
        *,
        require_record_crc: bool = True,
    ) -> None:
        if segment_size_bytes < MIN_SEGMENT_SIZE_BYTES:
            raise ValueError(
                f"segment_size_bytes {segment_size_bytes} is below {MIN_SEGMENT_SIZE_BYTES}"
            )
        self._fs = fs
        self._directory = directory
        self._segment_size_bytes = segment_size_bytes
        self._require_record_crc = require_record_crc
        self._envelopes: dict[int, Envelope] = {}
        for envelope in envelopes:
            if envelope.magic in (MESSAGE_MAGIC, BLANK_MAGIC) or envelope.magic in self._envelopes:
                raise ValueError(f"envelope magic {envelope.magic:#x} is already taken")
            if not _ITEM_HEAD_BYTES <= envelope.header_size_bytes < segment_size_bytes:
                raise ValueError(f"envelope header_size_bytes {envelope.header_size_bytes}")
            self._envelopes[envelope.magic] = envelope
        self._files = SegmentFiles(fs, max_open_segments)
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._flush_error: OSError | None = None
        self._segments: list[Segment] = []
        self._by_start: dict[int, Segment] = {}
        # Per segment: (position scanned up to, store time of the newest record seen).
        self._timestamps: dict[Segment, tuple[int, int | None]] = {}
        self._truncation_epoch = 0
        self._dir_dirty = False
        # Told how long each flush's syncs took (seconds); set by an observer, e.g. metrics.
        self.on_fsync: Callable[[float], None] | None = None
        fs.makedirs(directory)
        starts = sorted(
            start
            for start in map(parse_segment_file_name, fs.listdir(directory))
            if start is not None
        )
        for index, start in enumerate(starts):
            expected = starts[0] + index * segment_size_bytes
            if start != expected or start % segment_size_bytes:
                raise ValueError(
                    f"segment files in {directory} are not contiguous {segment_size_bytes}-byte "
                    f"segments: found {segment_file_name(start)} where {expected} was expected "
                    "(was segment_size_bytes changed?)"
                )
            self._add_segment(start)
        if self._segments:
            last = self._segments[-1]
            self._max_offset = last.start_offset + min(fs.file_size(last.path), segment_size_bytes)
        else:
            self._max_offset = 0
        # Nothing read back from disk is known to be synced until recover() or flush().
        self._flushed_offset = self.min_offset

    # ----------------------------------------------------------------- offsets

    @property
    def segment_size_bytes(self) -> int:
        return self._segment_size_bytes

    @property
    def min_offset(self) -> int:
        """The first stored byte: the start of the oldest segment (0 when there is none)."""
        segments = self._segments
        return segments[0].start_offset if segments else 0

    @property
    def max_offset(self) -> int:
        """The next write position: the end of valid data."""
        return self._max_offset

    @property
    def flushed_offset(self) -> int:
        """Every byte below this offset is durable."""
        return self._flushed_offset

    @property
    def segment_count(self) -> int:
        """Segment files the log holds (the newest included)."""
        return len(self._segments)

    @property
    def open_segment_count(self) -> int:
        return self._files.open_count

    def position_for(self, size_bytes: int) -> int:
        """Where a block of ``size_bytes`` would start: ``max_offset``, or the next segment's
        start when the block does not fit in the current one."""
        if not 0 < size_bytes <= self._segment_size_bytes:
            raise ValueError(
                f"a block of {size_bytes} bytes does not fit a {self._segment_size_bytes}-byte "
                "segment"
            )
        position = self._max_offset
        in_segment = position % self._segment_size_bytes
        if in_segment + size_bytes <= self._segment_size_bytes:
            return position
        return position - in_segment + self._segment_size_bytes

    # ----------------------------------------------------------------- writing

    def append(self, block: bytes | bytearray | memoryview) -> int:
        """Write ``block`` (one or more complete items) at ``position_for(len(block))``,
        writing an end-of-segment blank first when rolling; returns the block's start. The
        bytes are not durable until ``flush``. A write the disk refuses leaves nothing of
        itself behind (``_cut_failed_append``): DiskFullError when the device is full, else
        the OSError."""
        size = len(block)
        position = self.position_for(size)
        magic = _ITEM_HEAD.unpack_from(block, 0)[1] if size >= _ITEM_HEAD_BYTES else None
        if magic != MESSAGE_MAGIC and magic not in self._envelopes:
            raise CorruptRecordError("block does not start with a message record or envelope")
        current_end = self._max_offset
        created: Segment | None = None
        try:
            if position != current_end:
                remaining = position - current_end
                if remaining >= BLANK_SIZE_BYTES:
                    current = self._segment_at(current_end)
                    with self._files.use(current) as handle:
                        handle.pwrite(encode_blank(remaining), current_end - current.start_offset)
            segment = self._by_start.get(position - position % self._segment_size_bytes)
            if segment is None:
                with self._lock:
                    segment = created = self._add_segment(
                        position - position % self._segment_size_bytes
                    )
                    self._dir_dirty = True
            with self._files.use(segment, create=created is not None) as handle:
                handle.pwrite(block, position - segment.start_offset)
        except OSError as error:
            self._cut_failed_append(current_end, position, created)
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(
                    f"no space left on the device: the commit log could not write {size} "
                    f"bytes at physical offset {position} ({error.strerror or error}); nothing "
                    "of the write was kept, and writes resume once space is freed"
                ) from error
            raise
        with self._lock:
            self._max_offset = position + size
        return position

    def _cut_failed_append(self, current_end: int, position: int, created: Segment | None) -> None:
        """Undo what a failed ``append`` wrote: cut the segment holding ``current_end`` back
        to it (a blank, or part of the block) and the block's segment back to ``position``,
        syncing each cut, so not even a crash right after brings a record of the refused
        write back; a segment the append created goes. If a cut fails too, the log
        acknowledges nothing more (FlushFailedError, as after a failed fsync)."""
        try:
            if created is not None:
                with self._lock:
                    self._segments.remove(created)
                    del self._by_start[created.start_offset]
                    self._timestamps.pop(created, None)
                self._files.drop(created)
                if self._fs.exists(created.path):
                    self._fs.remove(created.path)
            for end in sorted({current_end, position}):
                segment = self._by_start.get(end - end % self._segment_size_bytes)
                if segment is None or segment is created:
                    continue
                with self._files.use(segment) as handle:
                    if handle.size() > end - segment.start_offset:
                        handle.truncate(end - segment.start_offset)
                        handle.sync()
        except (OSError, InvalidOffsetError) as error:
            self._flush_error = OSError(f"a failed append could not be cut back: {error}")
            raise FlushFailedError(
                f"a failed append at physical offset {position} could not be cut back "
                f"({error}); reopen and recover the store"
            ) from error

    def _add_segment(self, start_offset: int) -> Segment:
        segment = Segment(start_offset, f"{self._directory}/{segment_file_name(start_offset)}")
        self._segments.append(segment)
        self._by_start[start_offset] = segment
        return segment

    def _segment_end(self, physical_offset: int) -> int:
        return (
            physical_offset
            - physical_offset % self._segment_size_bytes
            + (self._segment_size_bytes)
        )

    def _segment_at(self, physical_offset: int) -> Segment:
        segment = self._by_start.get(physical_offset - physical_offset % self._segment_size_bytes)
        if segment is None:
            raise InvalidOffsetError(f"no segment holds physical offset {physical_offset}")
        return segment

    def flush(self) -> int:
        """Fsync every segment with unsynced data (and the directory if a segment file was
        created); returns the new flushed_offset. Raises FlushFailedError if an fsync fails,
        now or at any earlier call."""
        with self._flush_lock:
            if self._flush_error is not None:
                raise FlushFailedError(
                    f"an earlier fsync failed ({self._flush_error}); reopen and recover the store"
                )
            with self._lock:
                target = self._max_offset
                flushed = self._flushed_offset
                epoch = self._truncation_epoch
                dir_dirty = self._dir_dirty
                self._dir_dirty = False
                dirty = [
                    segment
                    for segment in self._segments
                    if segment.start_offset < target
                    and segment.start_offset + self._segment_size_bytes > flushed
                ]
            if target <= flushed and not dir_dirty:
                return flushed
            started_s = time.perf_counter()
            try:
                for segment in dirty:
                    self._sync_segment(segment)
                if dir_dirty:
                    self._fs.sync_dir(self._directory)
            except OSError as error:
                self._flush_error = error
                raise FlushFailedError(
                    f"fsync of the commit log failed at or after physical offset {flushed}: {error}"
                ) from error
            on_fsync = self.on_fsync
            if on_fsync is not None:
                on_fsync(time.perf_counter() - started_s)
            with self._lock:
                if epoch == self._truncation_epoch and target > self._flushed_offset:
                    self._flushed_offset = target
                return self._flushed_offset

    def _sync_segment(self, segment: Segment) -> None:
        try:
            with self._files.use(segment) as handle:
                handle.sync()
        except InvalidOffsetError as error:
            if not segment.dropped:
                raise OSError(f"segment {segment.path} cannot be opened: {error}") from error
            # Truncated away or deleted meanwhile: nothing of it is left to make durable, and
            # a truncation also stops this flush from publishing.

    def truncate_after(self, physical_offset: int) -> None:
        """Drop every byte at and after ``physical_offset`` (an item boundary), durably; later
        segment files are deleted. Raft uses this to cut a conflicting suffix."""
        if not self.min_offset <= physical_offset <= self._max_offset:
            raise InvalidOffsetError(
                f"cannot truncate at {physical_offset}: the log holds "
                f"[{self.min_offset}, {self._max_offset})"
            )
        self._truncate_to(physical_offset)

    def _truncate_to(self, physical_offset: int) -> None:
        keep_start = physical_offset - physical_offset % self._segment_size_bytes
        with self._lock:
            self._truncation_epoch += 1
            self._max_offset = physical_offset
            self._flushed_offset = min(self._flushed_offset, physical_offset)
            doomed = [s for s in self._segments if s.start_offset > keep_start]
            for segment in doomed:
                self._segments.remove(segment)
                del self._by_start[segment.start_offset]
                self._timestamps.pop(segment, None)
            kept = self._by_start.get(keep_start)
            if kept is not None:
                self._timestamps.pop(kept, None)
        for segment in reversed(doomed):
            self._files.drop(segment)
            self._fs.remove(segment.path)
        if doomed:
            self._fs.sync_dir(self._directory)
        if kept is not None:
            with self._files.use(kept) as handle:
                if handle.size() > physical_offset - keep_start:
                    handle.truncate(physical_offset - keep_start)
                    handle.sync()

    def recover(self, safe_offset: int) -> int:
        """Verify every item from ``safe_offset`` (an item boundary below which everything is
        known durable; clamped into the stored range) to the end of the files: magic, sizes,
        CRCs, physical offsets, envelope verify. Everything from the first invalid byte on is
        the torn tail and is truncated, later segments included. Syncs what is kept; returns
        the new max_offset (also the new flushed_offset)."""
        segments = self._segments
        data_end = (
            segments[-1].start_offset + self._fs.file_size(segments[-1].path) if segments else 0
        )
        start = min(max(safe_offset, self.min_offset), data_end)
        valid_end = start
        try:
            for position, magic, item in self._items(start, data_end):
                if magic == BLANK_MAGIC:
                    valid_end = self._segment_end(position)
                else:
                    self._verify_item(position, magic, item)
                    valid_end = position + len(item)
        except CorruptRecordError:
            pass  # the first invalid item: valid_end is where the torn tail starts
        self._truncate_to(valid_end)
        with self._lock:
            # The caller vouches for everything below the safe offset; flush() syncs the rest
            # and the directory (segment files created or removed before the crash).
            self._flushed_offset = start
            self._dir_dirty = True
        return self.flush()

    def _verify_item(self, position: int, magic: int, item: memoryview) -> None:
        if magic == MESSAGE_MAGIC:
            verify_record(
                item,
                0,
                require_record_crc=self._require_record_crc,
                expected_physical_offset=position,
            )
            return
        envelope = self._envelopes[magic]
        if len(item) < envelope.header_size_bytes or not envelope.verify(item):
            raise _InvalidItem(position, f"envelope {magic:#x} failed verification")
        for record_position, record in self._nested(position, item, envelope):
            verify_record(
                record,
                0,
                require_record_crc=self._require_record_crc,
                expected_physical_offset=record_position,
            )

    # ----------------------------------------------------------------- reading

    def read(self, physical_offset: int, size_bytes: int) -> bytes:
        """``size_bytes`` raw bytes at ``physical_offset``; the range must lie in one segment
        and below max_offset."""
        segment = self._segment_at(physical_offset)
        in_segment = physical_offset - segment.start_offset
        if (
            physical_offset < self.min_offset
            or size_bytes < 0
            or physical_offset + size_bytes > self._max_offset
            or in_segment + size_bytes > self._segment_size_bytes
        ):
            raise InvalidOffsetError(
                f"cannot read {size_bytes} bytes at {physical_offset}: the log holds "
                f"[{self.min_offset}, {self._max_offset}) in {self._segment_size_bytes}-byte "
                "segments"
            )
        with self._files.use(segment) as handle:
            data = handle.pread(size_bytes, in_segment)
        if len(data) != size_bytes:
            raise CorruptRecordError(
                f"segment {segment.path} ends before {physical_offset + size_bytes}"
            )
        return data

    def read_record(self, physical_offset: int) -> MessageRecord:
        """The message record at ``physical_offset``, fully verified (see Integrity)."""
        if not self.min_offset <= physical_offset < self._max_offset:
            raise InvalidOffsetError(
                f"physical offset {physical_offset} is outside [{self.min_offset}, "
                f"{self._max_offset})"
            )
        segment = self._segment_at(physical_offset)
        in_segment = physical_offset - segment.start_offset
        available = min(self._segment_size_bytes - in_segment, self._max_offset - physical_offset)
        with self._files.use(segment) as handle:
            data = handle.pread(min(_RECORD_READ_GUESS_BYTES, available), in_segment)
            if len(data) >= _ITEM_HEAD_BYTES:
                total_size = _ITEM_HEAD.unpack_from(data, 0)[0]
                if len(data) < total_size <= available:
                    data = handle.pread(total_size, in_segment)
        view = memoryview(data)
        if len(view) >= _ITEM_HEAD_BYTES:
            view = view[: max(_ITEM_HEAD.unpack_from(view, 0)[0], 0)]
        record = decode_record(view, 0, require_record_crc=self._require_record_crc)
        if record.physical_offset != physical_offset:
            raise CorruptRecordError(
                f"record at physical offset {physical_offset} says it lies at "
                f"{record.physical_offset}"
            )
        return record

    def read_records(self, places: Sequence[tuple[int, int]]) -> list[MessageRecord]:
        """The records at ``places`` (``(physical_offset, size_bytes)``, ascending, from
        ConsumeQueue units), each verified as ``read_record`` does. Records close together in
        one segment are read with one pread (a queue's messages usually are: this is the pull
        path), so a batch costs a few reads instead of one per message."""
        records: list[MessageRecord] = []
        for data, first_offset, run in self._read_runs(places):
            if data is None:
                records.append(self.read_record(first_offset))
                continue
            for offset, size in run:
                relative = offset - first_offset
                view = data[relative : relative + size]
                if len(view) >= _ITEM_HEAD_BYTES and _ITEM_HEAD.unpack_from(view, 0)[0] != size:
                    raise CorruptRecordError(
                        f"record at physical offset {offset} is not {size} bytes long"
                    )
                record = decode_record(view, 0, require_record_crc=self._require_record_crc)
                if record.physical_offset != offset:
                    raise CorruptRecordError(
                        f"record at physical offset {offset} says it lies at "
                        f"{record.physical_offset}"
                    )
                records.append(record)
        return records

    def read_record_bytes(self, places: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes of the records at ``places`` (as ``read_records`` takes them), undecoded:
        the fast pull path, whose client verifies the CRCs. Each record is checked for its
        size, magic and physical_offset field (``cut_records``), so a stale or damaged
        unit never passes another record off as its own. Read with as few preads as
        ``read_records``."""
        views: list[memoryview] = []
        for data, first_offset, run in self._read_runs(places):
            if data is None:
                data = memoryview(self.read(first_offset, run[0][1]))
            views += cut_records(data, first_offset, run)
        return views

    def _read_runs(
        self, places: Sequence[tuple[int, int]]
    ) -> Iterator[tuple[memoryview | None, int, Sequence[tuple[int, int]]]]:
        """``places`` cut into runs of records close together in one segment: (the run's
        bytes from its first record's offset, that offset, the run's places). A run of one
        record is not read (``None``): its caller reads it as it needs."""
        index = 0
        while index < len(places):
            first_offset = places[index][0]
            segment_start = first_offset - first_offset % self._segment_size_bytes
            run_end = index + 1
            span_end = first_offset + places[index][1]
            while run_end < len(places):
                offset, size = places[run_end]
                if (
                    offset - offset % self._segment_size_bytes != segment_start
                    or offset < span_end
                    or offset - span_end > _READ_RUN_MAX_GAP_BYTES
                    or offset + size - first_offset > _READ_RUN_MAX_BYTES
                ):
                    break
                span_end = offset + size
                run_end += 1
            run = places[index:run_end]
            index = run_end
            if len(run) == 1:
                yield None, first_offset, run
            else:
                # read() refuses a span outside the log or across a segment end.
                yield (
                    memoryview(self.read(first_offset, span_end - first_offset)),
                    first_offset,
                    run,
                )

    def scan(self, start: int, end: int) -> Iterator[tuple[int, memoryview]]:
        """Every message record ``(physical_offset, record bytes)`` with
        ``start <= physical_offset < end`` (end clamped to max_offset). ``start`` must be an
        item or record boundary. Blanks are crossed, envelopes entered; reads are chunked.
        Raises CorruptRecordError on a malformed item."""
        if start < self.min_offset:
            raise InvalidOffsetError(
                f"scan from {start}: the log starts at {self.min_offset} (retention)"
            )
        end = min(end, self._max_offset)
        for position, magic, item in self._items(start, end):
            if magic == MESSAGE_MAGIC:
                yield position, item
            elif magic != BLANK_MAGIC:
                for record_position, record in self._nested(position, item, self._envelopes[magic]):
                    if record_position >= end:
                        return
                    yield record_position, record

    def _items(self, start: int, end: int) -> Iterator[tuple[int, int, memoryview]]:
        """``(physical_offset, magic, item bytes)`` of every item starting in ``[start, end)``,
        blanks included, in order. Raises _InvalidItem at the first position that does not
        hold a well-formed item header or whose bytes end early."""
        position = start
        chunk = memoryview(b"")
        chunk_start = start
        while position < end:
            segment_end = self._segment_end(position)
            remaining = segment_end - position
            if remaining < BLANK_SIZE_BYTES:
                position = segment_end
                continue
            relative = position - chunk_start
            if relative + _ITEM_HEAD_BYTES > len(chunk):
                # Bounded by ``end`` too: a dispatcher scanning a few new records must not pay
                # for a megabyte read each time. An item running past it is re-read whole.
                wanted = max(end - position, _ITEM_HEAD_BYTES)
                chunk = self._read_chunk(position, min(_SCAN_CHUNK_BYTES, remaining, wanted))
                chunk_start = position
                relative = 0
                if len(chunk) < _ITEM_HEAD_BYTES:
                    raise _InvalidItem(position, "the data ends inside an item header")
            total_size, magic = _ITEM_HEAD.unpack_from(chunk, relative)
            if magic == BLANK_MAGIC:
                if total_size != remaining:
                    raise _InvalidItem(
                        position, f"a blank claims {total_size} bytes, {remaining} are left"
                    )
                yield position, magic, chunk[relative : relative + _ITEM_HEAD_BYTES]
                position = segment_end
                continue
            if magic != MESSAGE_MAGIC and magic not in self._envelopes:
                raise _InvalidItem(position, f"unknown magic {magic:#010x}")
            if not _ITEM_HEAD_BYTES < total_size <= remaining:
                raise _InvalidItem(
                    position, f"total_size {total_size} with {remaining} bytes left in segment"
                )
            if relative + total_size > len(chunk):
                chunk = self._read_chunk(
                    position, max(min(_SCAN_CHUNK_BYTES, remaining), total_size)
                )
                chunk_start = position
                relative = 0
                if len(chunk) < total_size:
                    raise _InvalidItem(position, f"the data ends inside a {total_size}-byte item")
            yield position, magic, chunk[relative : relative + total_size]
            position += total_size

    def read_items(self, start: int, max_bytes: int) -> tuple[int, bytes]:
        """Whole items (records, or envelopes) from ``start``, an item boundary, to stream to a
        replica: ``(where they start, their bytes)``, all in one segment and at most
        ``max_bytes`` unless the first item alone is larger. A blank at ``start`` moves on to
        the next segment; ``(max_offset, b"")`` when nothing is written past ``start`` yet."""
        if start < self.min_offset:
            raise InvalidOffsetError(f"read from {start}: the log starts at {self.min_offset}")
        parts: list[memoryview] = []
        first = self._max_offset
        size = 0
        for position, magic, item in self._items(start, self._max_offset):
            if magic == BLANK_MAGIC:
                if parts:
                    break  # the segment ends here: the next read starts in the next one
                continue
            if parts and size + len(item) > max_bytes:
                break
            if not parts:
                first = position
            parts.append(item)
            size += len(item)
        return first, b"".join(parts)

    def _read_chunk(self, physical_offset: int, size_bytes: int) -> memoryview:
        segment = self._by_start.get(physical_offset - physical_offset % self._segment_size_bytes)
        if segment is None:
            return memoryview(b"")
        with self._files.use(segment) as handle:
            return memoryview(handle.pread(size_bytes, physical_offset - segment.start_offset))

    @staticmethod
    def _nested(
        position: int, item: memoryview, envelope: Envelope
    ) -> Iterator[tuple[int, memoryview]]:
        """The message records filling an envelope's payload, checked for structure."""
        relative = envelope.header_size_bytes
        while relative < len(item):
            if relative + _ITEM_HEAD_BYTES > len(item):
                raise _InvalidItem(position, "envelope payload ends inside a record header")
            total_size, magic = _ITEM_HEAD.unpack_from(item, relative)
            if magic != MESSAGE_MAGIC or not _ITEM_HEAD_BYTES < total_size <= len(item) - relative:
                raise _InvalidItem(
                    position, f"envelope payload holds no whole record at byte {relative}"
                )
            yield position + relative, item[relative : relative + total_size]
            relative += total_size

    # ----------------------------------------------------------------- retention

    def segments(self) -> list[SegmentInfo]:
        """Every segment, oldest first, with its size and newest record's store time."""
        with self._lock:
            segments = list(self._segments)
        return [
            SegmentInfo(
                segment.start_offset,
                segment.path,
                self._fs.file_size(segment.path),
                self._last_modified_ms(segment),
            )
            for segment in segments
        ]

    def _last_modified_ms(self, segment: Segment) -> int | None:
        """Found by scanning the segment's records once, remembering how far it got, so a
        sealed segment is scanned once and the active one only in its new part."""
        with self._lock:
            epoch = self._truncation_epoch
            scanned_to, newest_ms = self._timestamps.get(segment, (segment.start_offset, None))
        end = min(self._segment_end(segment.start_offset), self._max_offset)
        for position, record in self.scan(scanned_to, end):
            newest_ms = read_store_timestamp_ms(record)
            scanned_to = position + len(record)
        with self._lock:
            # A truncation meanwhile may have cut what was scanned: do not cache it.
            if (
                epoch == self._truncation_epoch
                and self._by_start.get(segment.start_offset) is segment
            ):
                self._timestamps[segment] = (scanned_to, newest_ms)
        return newest_ms

    def delete_segment(self, start_offset: int) -> None:
        """Delete the oldest segment (retention). The newest segment is never deleted."""
        with self._lock:
            segments = self._segments
            if not segments or segments[0].start_offset != start_offset:
                raise ValueError(f"segment {start_offset} is not the oldest segment")
            if len(segments) == 1:
                raise ValueError(f"segment {start_offset} is the active segment")
            segment = segments.pop(0)
            del self._by_start[start_offset]
            self._timestamps.pop(segment, None)
            self._flushed_offset = max(self._flushed_offset, segments[0].start_offset)
        self._files.drop(segment)
        self._fs.remove(segment.path)
        self._fs.sync_dir(self._directory)

    def replace_segments(self, source_dir: str, end_offset: int) -> None:
        """Replace the whole log by the segment files in ``source_dir`` (a Raft follower
        installing the leader's segments: the snapshot IS the CommitLog). The files must be
        durable, contiguous and named by their start offsets; the log then ends at
        ``end_offset``. With no data at all the source holds one empty file whose name says
        where the log starts. Durable when it returns (files renamed, directory synced)."""
        names = sorted(
            n for n in self._fs.listdir(source_dir) if parse_segment_file_name(n) is not None
        )
        starts = [parse_segment_file_name(n) or 0 for n in names]
        if not starts or any(
            start != starts[0] + i * self._segment_size_bytes for i, start in enumerate(starts)
        ):
            raise ValueError(f"{source_dir} holds no contiguous segment files: {names}")
        empty = len(starts) == 1 and self._fs.file_size(os.path.join(source_dir, names[0])) == 0
        if (
            not (starts[0] <= end_offset or empty)
            or end_offset > starts[-1] + self._segment_size_bytes
        ):
            raise ValueError(f"end offset {end_offset} outside the segments starting {starts}")
        # An empty log starts at its one file; the data before it is gone everywhere.
        end_offset = max(end_offset, starts[0])
        with self._lock:
            self._truncation_epoch += 1
            doomed = list(self._segments)
            self._segments.clear()
            self._by_start.clear()
            self._timestamps.clear()
        for segment in doomed:
            self._files.drop(segment)
            self._fs.remove(segment.path)
        for name in names:
            self._fs.rename(os.path.join(source_dir, name), os.path.join(self._directory, name))
        self._fs.sync_dir(self._directory)
        with self._lock:
            for start in starts:
                self._add_segment(start)
            self._max_offset = self._flushed_offset = end_offset

    def close(self) -> None:
        """Close every handle. Does not flush: stop the flusher (which flushes) first."""
        self._files.close_all()
