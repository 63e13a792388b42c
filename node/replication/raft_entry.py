"""The Raft entry envelope: how one Raft log entry is laid out as an item of the CommitLog.

The Raft log IS the CommitLog (DLedger's model): each entry is a store ``Envelope`` item whose
header carries the entry's term, index and type, and whose payload is the message records the
entry replicates. The store steps into the payload (dispatch, reads by physical offset) without
knowing what Raft is.

Layout (big-endian; ``ENTRY_HEADER_SIZE_BYTES`` = 32)::

    total_size(4) | magic(4) | log_term(8) | log_index(8) | entry_type(1) | reserved(3) | crc32(4)
    payload: zero or more message records (record.py), each naming its own physical offset

Two kinds, told apart by magic (the store registers one ``Envelope`` per magic):
- ``ENTRY_MAGIC``, entry_type NORMAL: the payload is ``Entry.data``, which must be exactly a
  sequence of message records (possibly none: a new leader's no-op is an empty entry).
- ``CONF_ENTRY_MAGIC``, entry_type CONF_CHANGE: a fixed ``CONF_ENTRY_SIZE_BYTES`` header whose
  tail holds ``conf_length(2) | ConfChange bytes | zero padding``; no payload.

Why a second envelope kind rather than a conf change wrapped in a record on a system topic:
a nested record is dispatched into a ConsumeQueue, and ConsumeQueues demand dense queue
offsets, so every replica would have to derive the same queue offset for each conf-change record
from the whole log prefix, across compaction and snapshots. A header the store never looks into
has no such bookkeeping and still keeps the store ignorant of Raft.

Rules this module keeps:
- The CRC32 covers every header byte after magic except the CRC field itself (term, index,
  type, reserved) plus everything after the 32-byte header (payload or conf area). With
  ``total_size`` and magic checked structurally, ``verify_entry`` refuses any single-byte
  change of an entry (DLedger's entry CRCs were never computed; ours always are).
- Pure functions over bytes; no I/O. ``envelope_to_entry`` copies the payload once (into
  ``Entry.data``); a writer joins ``entry_envelope_parts`` into its block, copying the
  payload once.
- ``entry_to_envelope`` refuses a payload whose records do not name the physical offset where
  they will lie: a wrong plan is caught before a byte is written (recovery would otherwise
  cut the log there).
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from raftlog.raft.types import Entry, EntryType
from raftlog.store.commit_log import Envelope
from raftlog.store.errors import CorruptRecordError
from raftlog.store.record import MESSAGE_MAGIC

# Distinct from the store's MESSAGE_MAGIC (0xDAA320A7) and BLANK_MAGIC (0xCBD43194).
ENTRY_MAGIC = 0xA1F7E0D1
CONF_ENTRY_MAGIC = 0xA1F7E0C2

_HEADER = struct.Struct(">iIqqB3xI")
ENTRY_HEADER_SIZE_BYTES = _HEADER.size
_CRC_POS = ENTRY_HEADER_SIZE_BYTES - 4
# The CRC skips total_size and magic (bytes 0..7) and itself (bytes 28..31).
_CRC_SKIP_BYTES = 8
_CRC = struct.Struct(">I")
_CONF_LENGTH = struct.Struct(">H")
# Room for a ConfChange whose context is a member address: a 64-character id and an
# address of up to 156 characters (a Kubernetes pod DNS name and port fit with room to spare).
CONF_ENTRY_SIZE_BYTES = 256
MAX_CONF_CHANGE_BYTES = CONF_ENTRY_SIZE_BYTES - ENTRY_HEADER_SIZE_BYTES - _CONF_LENGTH.size

# A record's total_size, magic and physical_offset (field 7 of the spec's table, at byte 28),
# read with one unpack: this check runs for every record a replica writes.
_RECORD_PLACE = struct.Struct(">iI20xq")
_MIN_RECORD_BYTES = _RECORD_PLACE.size

_MAGIC_OF_TYPE = {EntryType.NORMAL: ENTRY_MAGIC, EntryType.CONF_CHANGE: CONF_ENTRY_MAGIC}


class EntryHeader(NamedTuple):
    total_size: int
    magic: int
    log_term: int
    log_index: int
    entry_type: EntryType
    crc32: int


def envelope_size_bytes(entry_type: EntryType, data_size_bytes: int) -> int:
    """The size of the envelope holding an entry of this type with this much ``Entry.data``."""
    if entry_type is EntryType.CONF_CHANGE:
        if data_size_bytes > MAX_CONF_CHANGE_BYTES:
            raise ValueError(
                f"a conf change of {data_size_bytes} bytes exceeds {MAX_CONF_CHANGE_BYTES}"
            )
        return CONF_ENTRY_SIZE_BYTES
    return ENTRY_HEADER_SIZE_BYTES + data_size_bytes


def encode_entry_head(
    log_term: int,
    log_index: int,
    entry_type: EntryType,
    payload: bytes | bytearray | memoryview,
) -> bytes:
    """Every byte of the envelope before the NORMAL payload (a CONF_CHANGE envelope whole),
    so a writer can join heads and payloads into one block with a single copy."""
    size = envelope_size_bytes(entry_type, len(payload))
    magic = _MAGIC_OF_TYPE[entry_type]
    if entry_type is EntryType.CONF_CHANGE:
        tail = _CONF_LENGTH.pack(len(payload)) + bytes(payload)
        tail += bytes(CONF_ENTRY_SIZE_BYTES - ENTRY_HEADER_SIZE_BYTES - len(tail))
    else:
        tail = b""
    fields = _HEADER.pack(size, magic, log_term, log_index, entry_type, 0)
    covered = tail if entry_type is EntryType.CONF_CHANGE else payload
    crc = zlib.crc32(covered, zlib.crc32(fields[_CRC_SKIP_BYTES:_CRC_POS]))
    return fields[:_CRC_POS] + _CRC.pack(crc) + tail


def encode_entry(
    log_term: int,
    log_index: int,
    entry_type: EntryType,
    payload: bytes | bytearray | memoryview,
) -> bytes:
    """The envelope of one entry. ``payload`` is ``Entry.data``: message records for NORMAL,
    the ``ConfChange`` bytes for CONF_CHANGE. Record offsets are not checked here (see
    ``entry_to_envelope``)."""
    head = encode_entry_head(log_term, log_index, entry_type, payload)
    if entry_type is EntryType.CONF_CHANGE:
        return head
    return head + payload


def decode_entry_header(view: bytes | bytearray | memoryview) -> EntryHeader:
    """The header at the start of ``view`` (at least 32 bytes); checks magic and type only."""
    if len(view) < ENTRY_HEADER_SIZE_BYTES:
        raise CorruptRecordError(f"an entry header needs 32 bytes, got {len(view)}")
    total_size, magic, log_term, log_index, type_byte, crc32 = _HEADER.unpack_from(view, 0)
    if magic == ENTRY_MAGIC and type_byte == EntryType.NORMAL:
        entry_type = EntryType.NORMAL
    elif magic == CONF_ENTRY_MAGIC and type_byte == EntryType.CONF_CHANGE:
        entry_type = EntryType.CONF_CHANGE
    else:
        raise CorruptRecordError(f"magic {magic:#010x} with entry type {type_byte} is no entry")
    return EntryHeader(total_size, magic, log_term, log_index, entry_type, crc32)


def verify_entry(view: memoryview) -> bool:
    """True when ``view`` is exactly one whole, intact entry envelope (structure and CRC)."""
    try:
        header = decode_entry_header(view)
    except CorruptRecordError:
        return False
    if header.total_size != len(view) or header.log_index < 1 or header.log_term < 1:
        return False
    if header.entry_type is EntryType.CONF_CHANGE:
        if len(view) != CONF_ENTRY_SIZE_BYTES:
            return False
        conf_length = _CONF_LENGTH.unpack_from(view, ENTRY_HEADER_SIZE_BYTES)[0]
        if conf_length > MAX_CONF_CHANGE_BYTES:
            return False
    crc = zlib.crc32(view[_CRC_SKIP_BYTES:_CRC_POS])
    return zlib.crc32(view[ENTRY_HEADER_SIZE_BYTES:], crc) == header.crc32


ENTRY_ENVELOPE = Envelope(ENTRY_MAGIC, ENTRY_HEADER_SIZE_BYTES, verify_entry)
CONF_ENTRY_ENVELOPE = Envelope(CONF_ENTRY_MAGIC, CONF_ENTRY_SIZE_BYTES, verify_entry)
ENTRY_ENVELOPES = (ENTRY_ENVELOPE, CONF_ENTRY_ENVELOPE)
"""Pass these to the store (``CommitLog(envelopes=...)``, ``MessageStore.open(envelopes=...)``)."""


def check_record_offsets(
    payload: bytes | bytearray | memoryview, first_record_physical_offset: int
) -> None:
    """Raise ValueError unless ``payload`` is a whole sequence of records each naming the
    physical offset it gets when the payload starts at ``first_record_physical_offset``.
    Structure only: the records' own CRCs are verified by recovery and reads."""
    unpack = _RECORD_PLACE.unpack_from
    relative = 0
    size = len(payload)
    while relative < size:
        if relative + _MIN_RECORD_BYTES > size:
            raise ValueError(f"entry payload ends inside a record header at byte {relative}")
        total_size, magic, named = unpack(payload, relative)
        if magic != MESSAGE_MAGIC or not _MIN_RECORD_BYTES <= total_size <= size - relative:
            raise ValueError(f"entry payload holds no whole record at byte {relative}")
        if named != first_record_physical_offset + relative:
            raise ValueError(
                f"a record of the entry names physical offset {named} but would lie at "
                f"{first_record_physical_offset + relative}: the entry was planned for "
                "another position"
            )
        relative += total_size


def entry_to_envelope(entry: Entry, physical_offset: int) -> bytes:
    """The envelope of ``entry`` written at ``physical_offset``; ValueError when a nested
    record does not name where it will lie."""
    return b"".join(entry_envelope_parts(entry, physical_offset))


def entry_envelope_parts(entry: Entry, physical_offset: int) -> tuple[bytes, bytes]:
    """``(head, payload)`` of ``entry``'s envelope at ``physical_offset`` (their join is the
    envelope; the payload is ``entry.data`` itself, not a copy). ValueError when a nested
    record does not name where it will lie."""
    if entry.type is EntryType.CONF_CHANGE:
        return encode_entry_head(entry.term, entry.index, entry.type, entry.data), b""
    check_record_offsets(entry.data, physical_offset + ENTRY_HEADER_SIZE_BYTES)
    return encode_entry_head(entry.term, entry.index, entry.type, entry.data), entry.data


def envelope_to_entry(view: bytes | bytearray | memoryview) -> Entry:
    """The Raft entry an envelope holds (the caller has verified it)."""
    header = decode_entry_header(view)
    if header.entry_type is EntryType.CONF_CHANGE:
        conf_length = _CONF_LENGTH.unpack_from(view, ENTRY_HEADER_SIZE_BYTES)[0]
        start = ENTRY_HEADER_SIZE_BYTES + _CONF_LENGTH.size
        data = bytes(view[start : start + conf_length])
    else:
        data = bytes(view[ENTRY_HEADER_SIZE_BYTES : header.total_size])
    return Entry(header.log_index, header.log_term, header.entry_type, data)
