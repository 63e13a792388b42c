"""The message record codec: MessageRecord <-> bytes, byte for byte as docs/store-format.md says.

Pure functions over bytes; no I/O, no clock. Integers are big-endian. The CommitLog, the
dispatcher, (through ``node``) the replication path and the client's pull decoder all read
and write records only through this module (the client may import it: pyproject.toml).

Rules this module keeps:
- The 17 fields are laid out exactly as the spec's table; ``vectors.json`` pins the bytes.
- ``sys_flag`` bits 0x10/0x20 always agree with the address family of born_host/store_host:
  ``MessageRecord`` sets them from the hosts when it is built, so no record can disagree.
- Properties are ordered ``key\\x01value\\x02`` pairs, the last pair included; keys and values
  never contain \\x01 or \\x02 (``validation`` refuses them before anything is encoded).
- Decoding never trusts a length: magic, every inner length and ``total_size`` must agree, and
  the body CRC must match, or ``CorruptRecordError`` is raised.

Integrity: why a record carries a second CRC
--------------------------------------------
The spec's ``body_crc`` covers only the body. A flipped byte in queue_offset, a timestamp, a
host, ``flag``, the topic's characters or a property value keeps every length consistent and
the body CRC valid, so a body-only check would hand back a *different* valid-looking message.
Structure checks cannot close that gap (a queue offset of 7 or 263 is equally plausible), so
the store adds what RocketMQ 5 added for the same reason (``enableAppendPropCRC``): a reserved
last property ``__CRC32#`` whose value is the 10-digit decimal CRC32 of every record byte
before that 20-byte trailer. It is an ordinary property, so the spec's byte layout holds
unchanged and a plain record (such as the one in ``vectors.json``) is still a valid record.

- ``encode_record(rec)`` appends the trailer by default (``record_crc=False`` gives the bare
  spec bytes); ``patch_record`` recomputes it after stamping the offsets and store time, so the
  leader's in-place fast path keeps records protected.
- The write path encodes with ``encode_unstamped_record`` (no ``MessageRecord``, one struct
  pack and one join) and leaves a placeholder trailer that only ``patch_record`` computes, so
  a record's CRC is computed once. Both encoders share ``_pack_record``: the bytes agree.
- ``verify_block`` checks records handed over already encoded (a producer's batch) the way
  ``decode_record`` does, trailer required, before the store stamps and writes them.
- Decoding always verifies a trailer that is present and strips it from ``properties``.
  ``require_record_crc=True`` also refuses a record without one; the CommitLog reads with it
  on by default, so a record it returns has every byte checked: any single-byte change is a
  structure error or a CRC mismatch (CRC32 detects every error burst up to 32 bits).
- ``read_dispatch_info`` is the dispatcher's fast path and checks structure only (no CRC):
  it reads records the CommitLog already verified (written by this node, or recovered).
- The fast pull splits the checks: on the node ``cut_records`` checks only that each record
  is where and as long as its ConsumeQueue unit says (size, magic, physical offset), and the
  client's ``decode_records`` checks every record as ``decode_record`` does, trailer required,
  before anything is handed to a user.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

from raftlog.store.errors import CorruptRecordError

MESSAGE_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194
BLANK_SIZE_BYTES = 8

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_RECORD_CRC = "__CRC32#"
KEY_SEPARATOR = " "
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

SYS_FLAG_BORN_HOST_V6 = 0x10
SYS_FLAG_STORE_HOST_V6 = 0x20

_RECORD_CRC_PREFIX = (PROPERTY_RECORD_CRC + NAME_VALUE_SEPARATOR).encode()
_RECORD_CRC_DIGITS = 10
RECORD_CRC_TRAILER_BYTES = len(_RECORD_CRC_PREFIX) + _RECORD_CRC_DIGITS + 1
_RECORD_CRC_PLACEHOLDER = _RECORD_CRC_PREFIX + b"0" * _RECORD_CRC_DIGITS + b"\x02"

# The fixed part of a record up to and including body_length, one Struct per host-address
# variant so a single unpack_from reads every fixed field (indexed by (sys_flag >> 4) & 3):
# total_size, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
# born_timestamp, born ip, born port, store_timestamp, store ip, store port, reconsume_times,
# prepared_transaction_offset, body_length.
_HEADERS = tuple(
    struct.Struct(f">iIIiiqqiq{born_ip}siq{store_ip}siiqi")
    for store_ip in (4, 16)
    for born_ip in (4, 16)
)
_TOTAL_AND_MAGIC = struct.Struct(">iI")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_TOPIC_LENGTHS = tuple(bytes((length,)) for length in range(256))
_QUEUE_OFFSET_POS = 20
_PHYSICAL_OFFSET_POS = 28
_SYS_FLAG_LOW_BYTE_POS = 39
_STORE_TIMESTAMP_POS = (56, 68, 56, 68)  # after born_host (8 or 20 bytes), per variant
_MAX_TOPIC_BYTES = 0xFF
_MAX_PROPERTIES_BYTES = 0xFFFF
# Smallest record: IPv4 hosts, empty body, topic and properties.
MIN_RECORD_SIZE_BYTES = _HEADERS[0].size + 1 + 2

Host = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One message as stored in the CommitLog (the spec's 17 fields; total_size and body_crc
    are computed by ``encode_record``)."""

    topic: str
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp_ms: int
    born_host: Host
    store_timestamp_ms: int
    store_host: Host
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    properties: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # The IPv6 bits are derived data: set them here so they can never disagree.
        bits = (SYS_FLAG_BORN_HOST_V6 if _is_ipv6(self.born_host[0]) else 0) | (
            SYS_FLAG_STORE_HOST_V6 if _is_ipv6(self.store_host[0]) else 0
        )
        sys_flag = (self.sys_flag & ~(SYS_FLAG_BORN_HOST_V6 | SYS_FLAG_STORE_HOST_V6)) | bits
        if sys_flag != self.sys_flag:
            object.__setattr__(self, "sys_flag", sys_flag)

    def get_property(self, key: str) -> str | None:
        """The value of the first property named ``key``, or None."""
        for name, value in self.properties:
            if name == key:
                return value
        return None

    @property
    def tags(self) -> str:
        return self.get_property(PROPERTY_TAGS) or ""

    @property
    def keys(self) -> tuple[str, ...]:
        return split_keys(self.get_property(PROPERTY_KEYS) or "")


class DispatchInfo(NamedTuple):
    """What the dispatcher needs from one record, read without copying the body."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    store_timestamp_ms: int
    tags: str
    keys: tuple[str, ...]
    uniq_key: str


def split_keys(keys_value: str) -> tuple[str, ...]:
    """KEYS holds space-separated keys; empty pieces (doubled spaces) are not keys."""
    return tuple(filter(None, keys_value.split(KEY_SEPARATOR)))


def _is_ipv6(address: str) -> bool:
    return ":" in address


@functools.lru_cache(maxsize=4096)
def pack_address(address: str) -> bytes:
    """The 4 or 16 bytes of an IPv4 or IPv6 address (cached: producers are few)."""
    family = socket.AF_INET6 if _is_ipv6(address) else socket.AF_INET
    try:
        return socket.inet_pton(family, address)
    except OSError as error:
        raise ValueError(f"host address {address!r} is not an IPv4 or IPv6 address") from error


def unpack_address(packed: bytes) -> str:
    """The text of a 4- or 16-byte packed address (inverse of ``pack_address``)."""
    if len(packed) == 4:
        return socket.inet_ntop(socket.AF_INET, packed)
    # ipaddress, not inet_ntop: glibc prints some IPv6 addresses in dotted IPv4 form.
    return str(ipaddress.IPv6Address(packed))


def encode_properties(properties: tuple[tuple[str, str], ...]) -> bytes:
    """``key\\x01value\\x02`` for each pair, in order, the last pair included."""
    return "".join(
        f"{key}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}" for key, value in properties
    ).encode()


def decode_properties(data: bytes | bytearray | memoryview) -> tuple[tuple[str, str], ...]:
    """Inverse of ``encode_properties``; CorruptRecordError on a malformed list."""
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError as error:
        raise CorruptRecordError(f"properties are not UTF-8: {error}") from error
    if not text:
        return ()
    if not text.endswith(PROPERTY_SEPARATOR):
        raise CorruptRecordError("properties do not end with the pair separator \\x02")
    pairs: list[tuple[str, str]] = []
    for item in text[:-1].split(PROPERTY_SEPARATOR):
        parts = item.split(NAME_VALUE_SEPARATOR)
        if len(parts) != 2:
            raise CorruptRecordError(f"property {item!r} is not one key\\x01value pair")
        pairs.append((parts[0], parts[1]))
    return tuple(pairs)


def encode_record(rec: MessageRecord, *, record_crc: bool = True) -> bytes:
    """The record's bytes, total_size and body CRC computed. With ``record_crc`` (the store's
    default) the ``__CRC32#`` trailer protecting every byte is appended; without it the bytes
    are exactly the spec's (as in vectors.json)."""
    topic_bytes = rec.topic.encode()
    if len(topic_bytes) > _MAX_TOPIC_BYTES:
        raise ValueError(f"topic is {len(topic_bytes)} bytes; the format holds {_MAX_TOPIC_BYTES}")
    properties_bytes = encode_properties(rec.properties)
    if record_crc:
        properties_bytes += _RECORD_CRC_PLACEHOLDER
    if len(properties_bytes) > _MAX_PROPERTIES_BYTES:
        raise ValueError(
            f"properties are {len(properties_bytes)} bytes; the format holds "
            f"{_MAX_PROPERTIES_BYTES}"
        )
    record = _pack_record(
        topic_bytes,
        rec.queue_id,
        rec.flag,
        rec.queue_offset,
        rec.physical_offset,
        rec.sys_flag,
        rec.born_timestamp_ms,
        pack_address(rec.born_host[0]),
        rec.born_host[1],
        rec.store_timestamp_ms,
        pack_address(rec.store_host[0]),
        rec.store_host[1],
        rec.reconsume_times,
        rec.prepared_transaction_offset,
        rec.body,
        properties_bytes,
    )
    if not record_crc:
        return record
    buf = bytearray(record)
    _write_record_crc(buf, 0, len(buf))
    return bytes(buf)


def encode_unstamped_record(
    topic_bytes: bytes,
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_address: bytes,
    born_port: int,
    store_address: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    properties_bytes: bytes,
) -> bytes:
    """A record for ``patch_record`` to stamp (the write path's encoder): queue offset,
    physical offset and store time are 0, and ``properties_bytes`` (``encode_properties``
    output) is followed by a placeholder ``__CRC32#`` trailer that ``patch_record`` fills.
    Addresses are ``pack_address`` bytes; the caller checked topic and properties lengths
    against the limits (which the format's length fields hold)."""
    return _pack_record(
        topic_bytes,
        queue_id,
        flag,
        0,
        0,
        sys_flag,
        born_timestamp_ms,
        born_address,
        born_port,
        0,
        store_address,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        body,
        properties_bytes + _RECORD_CRC_PLACEHOLDER,
    )


def _pack_record(
    topic_bytes: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_address: bytes,
    born_port: int,
    store_timestamp_ms: int,
    store_address: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    properties_bytes: bytes,
) -> bytes:
    # The host variant follows the packed addresses, so the IPv6 bits always agree.
    variant = (len(born_address) == 16) | (len(store_address) == 16) << 1
    header = _HEADERS[variant]
    return b"".join(
        (
            header.pack(
                header.size + len(body) + 3 + len(topic_bytes) + len(properties_bytes),
                MESSAGE_MAGIC,
                zlib.crc32(body),
                queue_id,
                flag,
                queue_offset,
                physical_offset,
                (sys_flag & ~(SYS_FLAG_BORN_HOST_V6 | SYS_FLAG_STORE_HOST_V6)) | variant << 4,
                born_timestamp_ms,
                born_address,
                born_port,
                store_timestamp_ms,
                store_address,
                store_port,
                reconsume_times,
                prepared_transaction_offset,
                len(body),
            ),
            body,
            _TOPIC_LENGTHS[len(topic_bytes)],
            topic_bytes,
            _U16.pack(len(properties_bytes)),
            properties_bytes,
        )
    )


def encode_blank(remaining_bytes: int) -> bytes:
    """The end-of-segment marker: ``remaining_bytes`` counts from the blank's first byte to the
    segment's end. Only these 8 bytes are written; the rest of the segment is ignored."""
    if remaining_bytes < BLANK_SIZE_BYTES:
        raise ValueError(f"a blank needs {BLANK_SIZE_BYTES} bytes, got {remaining_bytes}")
    return _TOTAL_AND_MAGIC.pack(remaining_bytes, BLANK_MAGIC)


# (header fields, body_pos, topic_pos, topic_len, properties_pos, properties_len); a plain
# tuple because this is on every per-message path.
_Layout = tuple[tuple[Any, ...], int, int, int, int, int]


def _layout(buf: bytes | bytearray | memoryview, pos: int) -> _Layout:
    """Check magic and that every inner length adds up to total_size; no CRC work."""
    available = len(buf) - pos
    if available < MIN_RECORD_SIZE_BYTES:
        raise CorruptRecordError(
            f"record at {pos}: {available} bytes left, a record needs at least "
            f"{MIN_RECORD_SIZE_BYTES}"
        )
    header = _HEADERS[(buf[pos + _SYS_FLAG_LOW_BYTE_POS] >> 4) & 3]
    minimum_size = header.size + 3
    if available < minimum_size:
        raise CorruptRecordError(f"record at {pos}: {available} bytes left, need {minimum_size}")
    fields = header.unpack_from(buf, pos)
    total_size = fields[0]
    if fields[1] != MESSAGE_MAGIC:
        raise CorruptRecordError(
            f"record at {pos}: magic {fields[1]:#010x} is not {MESSAGE_MAGIC:#x}"
        )
    if not minimum_size <= total_size <= available:
        raise CorruptRecordError(
            f"record at {pos}: total_size {total_size} outside [{minimum_size}, {available}]"
        )
    end = pos + total_size
    body_pos = pos + header.size
    body_len = fields[16]
    topic_len_pos = body_pos + body_len
    if body_len < 0 or topic_len_pos + 3 > end:
        raise CorruptRecordError(
            f"record at {pos}: body_length {body_len} overruns total_size {total_size}"
        )
    topic_len = buf[topic_len_pos]
    properties_len_pos = topic_len_pos + 1 + topic_len
    if properties_len_pos + 2 > end:
        raise CorruptRecordError(
            f"record at {pos}: topic_length {topic_len} overruns total_size {total_size}"
        )
    properties_len = (buf[properties_len_pos] << 8) | buf[properties_len_pos + 1]
    if properties_len_pos + 2 + properties_len != end:
        raise CorruptRecordError(
            f"record at {pos}: inner lengths add up to "
            f"{properties_len_pos + 2 + properties_len - pos}, total_size says {total_size}"
        )
    return fields, body_pos, topic_len_pos + 1, topic_len, properties_len_pos + 2, properties_len


def _has_record_crc(
    buf: bytes | bytearray | memoryview, properties_pos: int, properties_end: int
) -> bool:
    """True when the last property pair is exactly the ``__CRC32#`` trailer (the byte before
    it must end a pair, so a user key merely ending in ``__CRC32#`` does not count)."""
    trailer_pos = properties_end - RECORD_CRC_TRAILER_BYTES
    if trailer_pos < properties_pos:
        return False
    if trailer_pos > properties_pos and buf[trailer_pos - 1] != 0x02:
        return False
    return buf[trailer_pos : trailer_pos + len(_RECORD_CRC_PREFIX)] == _RECORD_CRC_PREFIX


def _write_record_crc(buf: bytearray, pos: int, total_size: int) -> None:
    end = pos + total_size
    with memoryview(buf) as view:
        crc = zlib.crc32(view[pos : end - RECORD_CRC_TRAILER_BYTES])
    buf[end - 1 - _RECORD_CRC_DIGITS : end - 1] = str(crc).zfill(_RECORD_CRC_DIGITS).encode()


def _check_crcs(
    buf: bytes | bytearray | memoryview, pos: int, layout: _Layout, require_record_crc: bool
) -> bool:
    """Verify the body CRC and the record CRC trailer; returns whether a trailer is present."""
    fields, body_pos, _, _, properties_pos, _ = layout
    view = buf if type(buf) is memoryview else memoryview(buf)
    actual = zlib.crc32(view[body_pos : body_pos + fields[16]])
    if actual != fields[2]:
        raise CorruptRecordError(
            f"record at {pos}: body CRC {actual:#010x} does not match stored {fields[2]:#010x}"
        )
    end = pos + fields[0]
    if not _has_record_crc(buf, properties_pos, end):
        if require_record_crc:
            raise CorruptRecordError(
                f"record at {pos}: no {PROPERTY_RECORD_CRC} trailer, so its header bytes cannot "
                "be verified (encode with record_crc=True)"
            )
        return False
    expected = zlib.crc32(view[pos : end - RECORD_CRC_TRAILER_BYTES])
    # The 10 digits and the pair separator, compared as bytes (one format, no parse).
    if view[end - 1 - _RECORD_CRC_DIGITS : end] != b"%010d\x02" % expected:
        digits = bytes(view[end - 1 - _RECORD_CRC_DIGITS : end - 1])
        raise CorruptRecordError(
            f"record at {pos}: record CRC {digits!r} does not match computed {expected:010d}"
        )
    return True


def verify_record(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    require_record_crc: bool = False,
    expected_physical_offset: int | None = None,
) -> int:
    """Check the record at ``pos`` the way ``decode_record`` does, without building it (the
    recovery path); returns its total_size. ``expected_physical_offset`` also demands that the
    record's physical_offset field names where it actually lies."""
    layout = _layout(buf, pos)
    _check_crcs(buf, pos, layout, require_record_crc)
    fields = layout[0]
    if expected_physical_offset is not None and fields[6] != expected_physical_offset:
        raise CorruptRecordError(
            f"record at physical offset {expected_physical_offset} says it lies at {fields[6]}"
        )
    total_size: int = fields[0]
    return total_size


# total_size, magic and physical_offset of a record, in one unpack (``cut_records``).
_RECORD_PLACE = struct.Struct(">iI20xq")


def cut_records(
    data: memoryview, data_offset: int, places: Sequence[tuple[int, int]]
) -> list[memoryview]:
    """The records at ``places`` (``(physical_offset, size_bytes)``, as ConsumeQueue units say)
    cut out of ``data``, which holds the log from physical offset ``data_offset``. Each must be
    ``size_bytes`` long, carry the message magic and name its own physical offset, or
    CorruptRecordError is raised: what a reader that forwards record bytes undecoded checks
    (the fast pull; its client checks the CRCs). One unpack per record, no decoding."""
    unpack = _RECORD_PLACE.unpack_from
    available = len(data)
    views: list[memoryview] = []
    for physical_offset, size_bytes in places:
        pos = physical_offset - data_offset
        if (
            size_bytes < MIN_RECORD_SIZE_BYTES
            or pos < 0
            or pos + size_bytes > available
            or unpack(data, pos) != (size_bytes, MESSAGE_MAGIC, physical_offset)
        ):
            _refuse_place(data, pos, size_bytes, physical_offset)
        views.append(data[pos : pos + size_bytes])
    return views


def _refuse_place(data: memoryview, pos: int, size_bytes: int, physical_offset: int) -> NoReturn:
    where = f"record at physical offset {physical_offset}"
    if size_bytes < MIN_RECORD_SIZE_BYTES or pos < 0 or pos + size_bytes > len(data):
        raise CorruptRecordError(
            f"{where}: its unit says {size_bytes} bytes, {max(0, len(data) - pos)} were read "
            f"(a record needs at least {MIN_RECORD_SIZE_BYTES})"
        )
    total_size, magic, stored_offset = _RECORD_PLACE.unpack_from(data, pos)
    raise CorruptRecordError(
        f"{where}: total_size {total_size}, magic {magic:#010x}, physical_offset "
        f"{stored_offset}; its unit says {size_bytes} bytes of magic {MESSAGE_MAGIC:#x} at "
        f"{physical_offset}"
    )


class DecodedRecord(NamedTuple):
    """One record of a batch as ``decode_records`` gives it: every field, hosts as their
    packed bytes (``pack_address``) and port, CRCs verified, the trailer stripped."""

    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp_ms: int
    born_address: bytes
    born_port: int
    store_timestamp_ms: int
    store_address: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    size_bytes: int
    body_crc: int
    topic: str
    body: bytes
    properties: tuple[tuple[str, str], ...]


# DecodedRecord._make without its Python frame (this runs once per pulled message).
_new_decoded_record = tuple.__new__


class _CheckedRecord(NamedTuple):
    """One record of a run, checked as ``decode_record(..., require_record_crc=True)``
    checks it, with its topic and properties decoded (the CRC trailer excluded)."""

    fields: tuple[int, ...]
    body_pos: int
    topic: str
    properties_bytes: int
    properties: tuple[tuple[str, str], ...]


def _checked_records(buf: bytes | bytearray | memoryview) -> Iterator[_CheckedRecord]:
    """Every record of ``buf`` (back to back, nothing else), checked in order: structure,
    body CRC, the ``__CRC32#`` trailer, a UTF-8 topic (decoded once per distinct value) and
    properties a reader can decode. CorruptRecordError names the first bad record."""
    view = memoryview(buf)
    topics: dict[bytes, str] = {}
    position = 0
    end = len(view)
    index = 0
    while position < end:
        try:
            layout = _layout(view, position)
            _check_crcs(view, position, layout, True)
            fields, body_pos, topic_pos, topic_len, properties_pos, properties_len = layout
            topic_bytes = bytes(view[topic_pos : topic_pos + topic_len])
            topic = topics.get(topic_bytes)
            if topic is None:
                try:
                    topic = topics[topic_bytes] = str(topic_bytes, "utf-8")
                except UnicodeDecodeError as error:
                    raise CorruptRecordError(
                        f"record at {position}: topic is not UTF-8: {error}"
                    ) from error
            properties_len -= RECORD_CRC_TRAILER_BYTES
            # Readers decode the properties: a list they would refuse is never valid.
            properties = decode_properties(view[properties_pos : properties_pos + properties_len])
        except CorruptRecordError as error:
            raise CorruptRecordError(f"record {index}: {error}") from error
        yield _CheckedRecord(fields, body_pos, topic, properties_len, properties)
        position += fields[0]
        index += 1


def decode_records(buf: bytes | bytearray | memoryview) -> list[DecodedRecord]:
    """Every record of ``buf`` (back to back, nothing else), each checked as
    ``decode_record(..., require_record_crc=True)`` checks it: structure, body CRC and the
    ``__CRC32#`` trailer. CorruptRecordError names the first bad record. The pull client's
    decoder: one unpack and two CRCs per record, the topic decoded once per distinct value."""
    view = memoryview(buf)
    return [
        _new_decoded_record(
            DecodedRecord,
            (
                *record.fields[3:16],
                record.fields[0],
                record.fields[2],
                record.topic,
                bytes(view[record.body_pos : record.body_pos + record.fields[16]]),
                record.properties,
            ),
        )
        for record in _checked_records(view)
    ]


class BlockRecord(NamedTuple):
    """What the store checks of one record of a pre-encoded block (``verify_block``)."""

    size: int
    topic: str
    queue_id: int
    body_bytes: int
    properties_bytes: int  # the encoded properties, the CRC trailer excluded
    born_timestamp_ms: int
    reconsume_times: int
    properties: tuple[tuple[str, str], ...]  # decoded, the CRC trailer excluded


class RecordShape(NamedTuple):
    """One record of a block whose structure was checked (no CRC work): its size and topic."""

    size: int
    topic: str


def walk_block(block: bytes | bytearray | memoryview) -> list[RecordShape]:
    """Every record of ``block`` (back to back, nothing else), its magic and inner lengths
    checked (CorruptRecordError at the first bad one), its CRCs not: for bytes a checksum
    over the whole block already vouches for (a master's stream to its slaves), at a quarter
    of ``verify_block``'s cost."""
    shapes: list[RecordShape] = []
    pos = 0
    while pos < len(block):
        fields, _, topic_pos, topic_len, _, _ = _layout(block, pos)
        shapes.append(
            RecordShape(fields[0], bytes(block[topic_pos : topic_pos + topic_len]).decode())
        )
        pos += fields[0]
    return shapes


def verify_block(block: bytes | bytearray | memoryview) -> list[BlockRecord]:
    """Check every record of ``block`` (back to back, nothing else) the way ``decode_record``
    does, the record CRC trailer required; CorruptRecordError names the first bad one."""
    return [
        BlockRecord(
            record.fields[0],
            record.topic,
            record.fields[3],
            record.fields[16],
            record.properties_bytes,
            record.fields[8],
            record.fields[14],
            record.properties,
        )
        for record in _checked_records(block)
    ]


def decode_record(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, require_record_crc: bool = False
) -> MessageRecord:
    """The record at ``pos``. Raises CorruptRecordError on a bad magic, inconsistent lengths,
    a body CRC mismatch, a record CRC trailer mismatch, or (if required) a missing trailer.
    The trailer is not part of the returned ``properties``."""
    layout = _layout(buf, pos)
    has_record_crc = _check_crcs(buf, pos, layout, require_record_crc)
    fields, body_pos, topic_pos, topic_len, properties_pos, properties_len = layout
    try:
        topic = str(buf[topic_pos : topic_pos + topic_len], "utf-8")
    except UnicodeDecodeError as error:
        raise CorruptRecordError(f"record at {pos}: topic is not UTF-8: {error}") from error
    properties_end = properties_pos + properties_len
    if has_record_crc:
        properties_end -= RECORD_CRC_TRAILER_BYTES
    return MessageRecord(
        topic=topic,
        queue_id=fields[3],
        flag=fields[4],
        queue_offset=fields[5],
        physical_offset=fields[6],
        sys_flag=fields[7],
        born_timestamp_ms=fields[8],
        born_host=(unpack_address(fields[9]), fields[10]),
        store_timestamp_ms=fields[11],
        store_host=(unpack_address(fields[12]), fields[13]),
        reconsume_times=fields[14],
        prepared_transaction_offset=fields[15],
        body=bytes(buf[body_pos : body_pos + fields[16]]),
        properties=decode_properties(buf[properties_pos:properties_end]),
    )


def patch_record(
    buf: bytearray,
    pos: int,
    *,
    queue_offset: int,
    physical_offset: int,
    store_timestamp_ms: int,
    store_host: bytes | None = None,
) -> None:
    """Stamp the fields the writer assigns into an encoded record, in place (the leader's
    fast path: no re-encode), and refresh its record CRC trailer if it has one.
    ``store_host`` (packed address + 4-byte port, ``pack_host``) is stamped too when given; its
    family must be the record's (``store_host_matches``). The record must be well-formed
    (``verify_record`` it first if it came from outside)."""
    variant = (buf[pos + _SYS_FLAG_LOW_BYTE_POS] >> 4) & 3
    _I64.pack_into(buf, pos + _QUEUE_OFFSET_POS, queue_offset)
    _I64.pack_into(buf, pos + _PHYSICAL_OFFSET_POS, physical_offset)
    timestamp_pos = pos + _STORE_TIMESTAMP_POS[variant]
    _I64.pack_into(buf, timestamp_pos, store_timestamp_ms)
    if store_host is not None:
        buf[timestamp_pos + 8 : timestamp_pos + 8 + len(store_host)] = store_host
    total_size = _I32.unpack_from(buf, pos)[0]
    end = pos + total_size
    trailer_pos = end - RECORD_CRC_TRAILER_BYTES
    if buf[trailer_pos : trailer_pos + len(_RECORD_CRC_PREFIX)] != _RECORD_CRC_PREFIX:
        return
    # Only a user property could end in a \x02 here; without one, the trailer must start the
    # properties (found from the lengths, which only this rarer case pays for).
    if buf[trailer_pos - 1] != 0x02:
        body_pos = pos + _HEADERS[variant].size
        topic_len_pos = body_pos + _I32.unpack_from(buf, body_pos - 4)[0]
        if trailer_pos != topic_len_pos + 3 + buf[topic_len_pos]:
            return
    _write_record_crc(buf, pos, total_size)


def pack_host(host: Host) -> bytes:
    """A host as a record stores it: 4 or 16 address bytes, then the port (4 bytes)."""
    return pack_address(host[0]) + _I32.pack(host[1])


def store_host_matches(buf: bytes | bytearray | memoryview, pos: int, packed_host: bytes) -> bool:
    """Whether the record at ``pos`` has room for ``packed_host`` (same address family)."""
    is_v6 = bool(buf[pos + _SYS_FLAG_LOW_BYTE_POS] & SYS_FLAG_STORE_HOST_V6)
    return is_v6 == (len(packed_host) == 20)


def read_store_timestamp_ms(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The store timestamp of the record at ``pos`` (no checks beyond the host variant)."""
    variant = (buf[pos + _SYS_FLAG_LOW_BYTE_POS] >> 4) & 3
    timestamp_ms: int = _I64.unpack_from(buf, pos + _STORE_TIMESTAMP_POS[variant])[0]
    return timestamp_ms


def read_dispatch_info(buf: bytes | bytearray | memoryview, pos: int = 0) -> DispatchInfo:
    """The dispatcher's view of the record at ``pos``: structure checked, no body copy, no CRC
    (the CommitLog verified the bytes when they were written or recovered)."""
    fields, _, topic_pos, topic_len, properties_pos, properties_len = _layout(buf, pos)
    tags = keys = uniq_key = ""
    if properties_len:
        # One C pass over the properties: keys and values never hold \x01 or \x02, so a
        # name anchored at the start or after a \x02 and followed by \x01 is exactly a pair's key.
        found = dict(
            _DISPATCH_PROPERTIES.findall(
                str(buf[properties_pos : properties_pos + properties_len], "utf-8")
            )
        )
        tags = found.get(PROPERTY_TAGS, "")
        keys = found.get(PROPERTY_KEYS, "")
        uniq_key = found.get(PROPERTY_UNIQ_KEY, "")
    return DispatchInfo(
        str(buf[topic_pos : topic_pos + topic_len], "utf-8"),
        fields[3],
        fields[5],
        fields[6],
        fields[0],
        fields[11],
        tags,
        split_keys(keys) if keys else (),
        uniq_key,
    )


_DISPATCH_PROPERTIES = re.compile(
    f"(?:^|{PROPERTY_SEPARATOR})({PROPERTY_TAGS}|{PROPERTY_KEYS}|{PROPERTY_UNIQ_KEY})"
    f"{NAME_VALUE_SEPARATOR}([^{PROPERTY_SEPARATOR}]*)"
)
