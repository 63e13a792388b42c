"""A fast Pull answer's records, verified and located for a columnar reader (the Spark
source), without building a ``Message`` or any per-field object per record.

``record_columns`` walks the records' bytes once: each record's structure (magic, inner
lengths, the queue's topic) and its ``__CRC32#`` trailer are checked, and where each record
starts is noted. A columnar reader then reads every fixed field of every record at once from
the positions below (``HEADER_LAYOUT``), e.g. with numpy, and cuts bodies and properties with
the returned offsets.

Rules this module keeps:
- It handles the common case only: IPv4 hosts (the fixed header is then ``HEADER_BYTES``
  long, so every field lies at a fixed offset) and one topic. For anything else (an IPv6
  host, another topic, a structure or CRC that does not check out) it returns None and the
  caller decodes with ``messages_from_records``, which handles every record and names a
  corrupt one in its error. So this module never decides that data is corrupt; it only
  declines the fast path.
- Integrity: every byte of a record before its trailer is covered by the trailer's CRC,
  which is checked (one ``zlib.crc32`` per record). The body CRC is not computed again: the
  body and its ``body_crc`` field lie under the trailer, and the store refuses a record whose
  body CRC does not match when it is written, so a record whose trailer checks out has a
  matching body CRC; computing both would CRC every body byte twice (the reader's largest
  cost at 1 KiB bodies).
- The layout constants are the store's record format (docs/store-format.md), taken from
  ``raftlog.store.record`` where it names them; the unit tests check the columns against
  ``messages_from_records`` on the same bytes.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from dataclasses import dataclass

from raftlog.store.record import (
    MESSAGE_MAGIC,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_RECORD_CRC,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    RECORD_CRC_TRAILER_BYTES,
)

# The fixed header of a record whose hosts are both IPv4: the 14 fixed fields and
# body_length. Offsets from the record's first byte, sizes in bytes, all big-endian.
HEADER_BYTES = 88
HEADER_LAYOUT: dict[str, tuple[int, int]] = {
    "queue_id": (12, 4),
    "queue_offset": (20, 8),
    "physical_offset": (28, 8),
    "born_timestamp_ms": (40, 8),
    "store_timestamp_ms": (56, 8),
    # The store host (address, port): with the physical offset, the offset message id.
    "store_host": (64, 8),
    "body_bytes": (84, 4),
}
# Every fixed field of such a record, in the store's order: total_size, magic, body_crc,
# queue_id, flag, queue_offset, physical_offset, sys_flag, born_timestamp, born ip and port,
# store_timestamp, store ip and port, reconsume_times, prepared_transaction_offset,
# body_length.
HEADER_V4 = struct.Struct(">iIIiiqqiq4siq4siiqi")
assert HEADER_V4.size == HEADER_BYTES
# What the columnar reader needs of the property format, named once (store.record's).
PROMOTED_PROPERTIES = (PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY)
NAME_VALUE_BYTE = ord(NAME_VALUE_SEPARATOR)
PAIR_END_BYTE = ord(PROPERTY_SEPARATOR)
# The ``__CRC32#`` trailer ending every record's properties.
TRAILER_BYTES = RECORD_CRC_TRAILER_BYTES

# total_size, magic, the low byte of sys_flag (the host-family bits), body_length.
_FIXED = struct.Struct(">iI31xB44xi")
_HOST_V6_BITS = 0x30
_TRAILER_PREFIX = (PROPERTY_RECORD_CRC + NAME_VALUE_SEPARATOR).encode()
_TRAILER_DIGITS_AND_END = 11  # ten CRC digits and the pair separator


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """Verified records, located: ``records`` holds ``len(starts)`` records of ``topic`` back
    to back; record ``i`` spans ``starts[i]`` to ``starts[i + 1]`` (the last to the end), its
    fixed fields at ``HEADER_LAYOUT`` from its start, its body right after ``HEADER_BYTES``,
    and its properties (``key\\x01value\\x02`` pairs, trailer excluded) at
    ``properties_starts[i]`` up to the trailer (``TRAILER_BYTES`` before its end)."""

    topic: str
    records: bytes
    starts: array[int]
    properties_starts: array[int]


def _topic_prefix(view: memoryview) -> bytes | None:
    """The first record's topic with its length byte, or None if that record is too short."""
    if len(view) < _FIXED.size + 1:
        return None
    body_bytes = _FIXED.unpack_from(view, 0)[3]
    length_pos = HEADER_BYTES + body_bytes
    if body_bytes < 0 or length_pos >= len(view):
        return None
    return bytes(view[length_pos : length_pos + 1 + view[length_pos]])


def record_columns(records: bytes) -> RecordColumns | None:
    """The records of a Pull answer (``return_records``), checked and located, or None when
    they are not all IPv4-hosted records of one topic whose structure and trailer CRC check
    out (decode those with ``messages_from_records``)."""
    if not isinstance(records, bytes):
        records = bytes(records)
    view = memoryview(records)
    end = len(view)
    topic_prefix = _topic_prefix(view)
    if topic_prefix is None:
        return None
    try:
        topic = str(topic_prefix[1:], "utf-8")
    except UnicodeDecodeError:
        return None
    starts = array("q")
    properties_starts = array("q")
    unpack = _FIXED.unpack_from
    crc32 = zlib.crc32
    # bytes.startswith and indexing, not memoryview slices compared: no object per check
    # (this loop runs once per consumed message).
    starts_with = records.startswith
    topic_bytes = len(topic_prefix)
    pos = 0
    # Bounded: every round moves ``pos`` forward by a record's size (at least the header) or
    # returns.
    while pos < end:
        if end - pos < HEADER_BYTES + topic_bytes + 2:
            return None
        total_size, magic, sys_flag_low, body_bytes = unpack(records, pos)
        record_end = pos + total_size
        topic_pos = pos + HEADER_BYTES + body_bytes
        properties_pos = topic_pos + topic_bytes + 2
        trailer_pos = record_end - TRAILER_BYTES
        if (
            magic != MESSAGE_MAGIC
            or sys_flag_low & _HOST_V6_BITS
            or body_bytes < 0
            or record_end > end
            or trailer_pos < properties_pos
            or not starts_with(topic_prefix, topic_pos)
            or (records[properties_pos - 2] << 8 | records[properties_pos - 1])
            != record_end - properties_pos
            or (trailer_pos > properties_pos and records[trailer_pos - 1] != PAIR_END_BYTE)
            or not starts_with(_TRAILER_PREFIX, trailer_pos)
            or not starts_with(
                b"%010d\x02" % crc32(view[pos:trailer_pos]), record_end - _TRAILER_DIGITS_AND_END
            )
        ):
            return None
        starts.append(pos)
        properties_starts.append(properties_pos)
        pos = record_end
    return RecordColumns(topic, records, starts, properties_starts)
