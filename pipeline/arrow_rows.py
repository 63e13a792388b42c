"""Pulled records -> one Arrow RecordBatch of the source schema, column by column.

Two ways in, one schema out:
- ``columns_batch``: the fast path, from the verified records ``record_columns`` located
  (``raftlog.client.record_columns``). Every fixed field of every record is read at once with
  numpy (one gather of the fixed headers, then a big-endian view per field); bodies and
  properties are cut from the records' bytes by Arrow (offsets that tile the buffer, then a
  ``take``); property pairs are split at their separators found by numpy. No Python object is
  made per record or per field.
- ``record_batch``: from client ``Message``s, for what the fast path declines (IPv6 hosts, a
  server that answers with messages, a record that does not check out: the client then names
  the corrupt record in its error).

Rules this module keeps: both give the same rows for the same records (the unit tests compare
them); timestamps go from milliseconds to ``timestamp[us, UTC]``; ``key`` is the message's KEYS
joined by single spaces (empty pieces dropped, as the client's ``keys``), null when it has
none; ``tags`` is null when the message has none; ``properties`` holds the pairs other than
KEYS, TAGS and UNIQ_KEY, in stored order.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raftlog.client import Message
from raftlog.client.record_columns import (
    HEADER_BYTES,
    HEADER_LAYOUT,
    NAME_VALUE_BYTE,
    PAIR_END_BYTE,
    PROMOTED_PROPERTIES,
    TRAILER_BYTES,
    RecordColumns,
)
from raftlog.pipeline.schema import ARROW_SCHEMA, PROPERTIES_TYPE, TIMESTAMP_TYPE

_MICROS_PER_MS = 1000
_HEADER_COLUMNS = np.arange(HEADER_BYTES)
_NULL_STRING = pa.scalar(None, pa.string())


def _timestamps(milliseconds: list[int]) -> pa.Array:
    as_ms = pa.array(milliseconds, pa.int64())
    return pc.multiply(as_ms, _MICROS_PER_MS).cast(TIMESTAMP_TYPE)


def _properties(messages: Sequence[Message]) -> pa.Array:
    """A map column from the messages' property pairs: offsets, then flat keys and values."""
    offsets = [0]
    total = 0
    for message in messages:
        total += len(message.properties)
        offsets.append(total)
    pairs = list(chain.from_iterable(m.properties for m in messages))
    names = pa.array([p[0] for p in pairs], pa.string())
    values = pa.array([p[1] for p in pairs], pa.string())
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), names, values, PROPERTIES_TYPE)


def record_batch(messages: Sequence[Message]) -> pa.RecordBatch:
    """The messages as one RecordBatch of ``ARROW_SCHEMA`` (column order included)."""
    columns = [
        pa.array([" ".join(m.keys).encode() if m.keys else None for m in messages], pa.binary()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([m.topic for m in messages], pa.string()),
        pa.array([m.queue_id for m in messages], pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        _timestamps([m.born_timestamp_ms for m in messages]),
        pa.array([m.tags or None for m in messages], pa.string()),
        _properties(messages),
        pa.array([m.msg_id for m in messages], pa.string()),
        _timestamps([m.store_timestamp_ms for m in messages]),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


class _Headers:
    """The fixed headers of ``count`` records as one (count, HEADER_BYTES) byte matrix."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    @classmethod
    def gather(cls, data: np.ndarray, starts: np.ndarray) -> _Headers:
        """The headers of the records starting at ``starts`` in ``data`` (one fancy index)."""
        return cls(data[starts[:, None] + _HEADER_COLUMNS])

    def first(self, count: int) -> _Headers:
        """The headers of the first ``count`` records (a view, no copy)."""
        return _Headers(self.rows[:count])

    def bytes_of(self, name: str) -> np.ndarray:
        offset, size = HEADER_LAYOUT[name]
        return self.rows[:, offset : offset + size]

    def integers(self, name: str) -> np.ndarray:
        """A big-endian integer field of every record, as native int64."""
        raw = np.ascontiguousarray(self.bytes_of(name))
        return raw.view(f">i{raw.shape[1]}").ravel().astype(np.int64)


def _cut(buffer: pa.Buffer, boundaries: np.ndarray, pieces: int, piece: int) -> pa.Array:
    """Piece ``piece`` of every group of ``pieces`` consecutive spans that ``boundaries`` (one
    offset per span start, then the end) tile ``buffer`` with, as one binary array."""
    spans = pa.BinaryArray.from_buffers(
        pa.binary(), len(boundaries) - 1, [None, pa.py_buffer(boundaries.astype(np.int32)), buffer]
    )
    return spans.take(pa.array(np.arange(piece, len(spans), pieces)))


def _message_ids(headers: _Headers) -> pa.Array:
    """The offset message ids: store host and physical offset as 32 upper-case hex digits."""
    raw = np.concatenate(
        [headers.bytes_of("store_host"), headers.bytes_of("physical_offset")], axis=1
    )
    digits = raw.tobytes().hex().upper().encode()
    width = 2 * raw.shape[1]
    offsets = np.arange(0, width * (len(raw) + 1), width, dtype=np.int32)
    return pa.StringArray.from_buffers(len(raw), pa.py_buffer(offsets), pa.py_buffer(digits))


class _Pairs:
    """Every record's property pairs, split at their separators: ``names``/``values`` flat,
    ``record`` the record each pair belongs to. ``valid`` is False when the text is not
    ``key\\x01value\\x02`` pairs of UTF-8 (the caller then takes the slow path)."""

    def __init__(self, text: pa.BinaryArray) -> None:
        offsets = np.frombuffer(text.buffers()[1], np.int32)[: len(text) + 1]
        data = np.frombuffer(text.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
        offsets = offsets - offsets[0]
        separators = np.flatnonzero((data == NAME_VALUE_BYTE) | (data == PAIR_END_BYTE))
        kinds = data[separators]
        ends = offsets[1:][offsets[1:] > offsets[:-1]]
        self.valid = bool(
            len(separators) % 2 == 0
            and (kinds[0::2] == NAME_VALUE_BYTE).all()
            and (kinds[1::2] == PAIR_END_BYTE).all()
            and (data[ends - 1] == PAIR_END_BYTE).all()
        )
        if not self.valid:
            return
        # Spans name | \x01 | value | \x02, four per pair.
        boundaries = np.empty(2 * len(separators) + 1, np.int64)
        boundaries[0] = 0
        boundaries[1::2] = separators
        boundaries[2::2] = separators + 1
        buffer = pa.py_buffer(data)
        names = _cut(buffer, boundaries, 4, 0)
        values = _cut(buffer, boundaries, 4, 2)
        try:
            self.names = names.cast(pa.string())
            self.values = values.cast(pa.string())
        except pa.ArrowInvalid:  # not UTF-8
            self.valid = False
            return
        pair_starts = boundaries[0:-1:4]
        self.record = np.searchsorted(offsets, pair_starts, side="right") - 1
        self.count = len(text)

    def is_named(self, name: str) -> np.ndarray:
        matches: np.ndarray = pc.equal(self.names, name).to_numpy(zero_copy_only=False)
        return matches

    def first_value(self, name: str) -> pa.Array:
        """Per record, the value of its first pair called ``name`` (null if none)."""
        pairs = np.flatnonzero(self.is_named(name))
        records, first = np.unique(self.record[pairs], return_index=True)
        chosen = np.full(self.count, -1, np.int64)
        chosen[records] = pairs[first]
        return self.values.take(pa.array(chosen, mask=chosen < 0))

    def user_properties(self) -> pa.Array:
        """The map column: every pair but the promoted ones, in stored order."""
        keep = np.ones(len(self.names), bool)
        for name in PROMOTED_PROPERTIES:
            keep &= ~self.is_named(name)
        counts = np.bincount(self.record[keep], minlength=self.count)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        mask = pa.array(keep)
        return pa.MapArray.from_arrays(
            offsets, self.names.filter(mask), self.values.filter(mask), PROPERTIES_TYPE
        )


def _empty_to_null(column: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(column, ""), _NULL_STRING, column)


def columns_batch(columns: RecordColumns, end_offset: int) -> pa.RecordBatch | None:
    """The located records whose queue offset is below ``end_offset`` as one RecordBatch of
    ``ARROW_SCHEMA``; None when their properties are not well-formed pairs of UTF-8."""
    data = np.frombuffer(columns.records, np.uint8)
    starts = np.frombuffer(columns.starts, np.int64)
    every_header = _Headers.gather(data, starts)
    queue_offsets = every_header.integers("queue_offset")
    count = int(np.searchsorted(queue_offsets, end_offset))
    record_ends = np.append(starts[1:], len(data))[:count]
    starts = starts[:count]
    headers = every_header.first(count)
    body_starts = starts + HEADER_BYTES
    # Spans per record: header | body | topic | properties | trailer.
    boundaries = np.empty(5 * count + 1, np.int64)
    boundaries[0:-1:5] = starts
    boundaries[1::5] = body_starts
    boundaries[2::5] = body_starts + headers.integers("body_bytes")
    boundaries[3::5] = np.frombuffer(columns.properties_starts, np.int64)[:count]
    boundaries[4::5] = record_ends - TRAILER_BYTES
    boundaries[-1] = record_ends[-1] if count else 0
    buffer = pa.py_buffer(columns.records)
    pairs = _Pairs(_cut(buffer, boundaries, 5, 3))
    if not pairs.valid:
        return None
    keys = pc.utf8_trim(pc.replace_substring_regex(pairs.first_value("KEYS"), " +", " "), " ")
    micros = {
        name: pa.array(headers.integers(name) * _MICROS_PER_MS, TIMESTAMP_TYPE)
        for name in ("born_timestamp_ms", "store_timestamp_ms")
    }
    arrays = [
        _empty_to_null(keys).cast(pa.binary()),
        _cut(buffer, boundaries, 5, 1),
        pa.repeat(pa.scalar(columns.topic, pa.string()), count),
        pa.array(headers.integers("queue_id").astype(np.int32)),
        pa.array(queue_offsets[:count]),
        micros["born_timestamp_ms"],
        _empty_to_null(pairs.first_value("TAGS")),
        pairs.user_properties(),
        _message_ids(headers),
        micros["store_timestamp_ms"],
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
