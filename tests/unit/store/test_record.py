import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.store.errors import CorruptRecordError
from raftlog.store.record import (
    BLANK_MAGIC,
    BLANK_SIZE_BYTES,
    MESSAGE_MAGIC,
    RECORD_CRC_TRAILER_BYTES,
    SYS_FLAG_BORN_HOST_V6,
    SYS_FLAG_STORE_HOST_V6,
    DispatchInfo,
    MessageRecord,
    decode_properties,
    decode_record,
    encode_blank,
    encode_properties,
    encode_record,
    patch_record,
    read_dispatch_info,
    read_store_timestamp_ms,
    verify_record,
)
from tests.support import load_vectors, make_record, records

VECTORS = load_vectors()


def vector_record() -> MessageRecord:
    fields = dict(VECTORS["message_record"]["fields"])
    fields["born_host"] = tuple(fields["born_host"])
    fields["store_host"] = tuple(fields["store_host"])
    fields["body"] = fields["body"].encode()
    fields["properties"] = tuple(tuple(pair) for pair in fields["properties"])
    return MessageRecord(**fields)


def test_encoding_the_vector_fields_gives_the_vector_bytes() -> None:
    vector = VECTORS["message_record"]
    encoded = encode_record(vector_record(), record_crc=False)
    assert encoded.hex() == vector["hex"]
    assert len(encoded) == vector["total_size"]
    assert zlib.crc32(vector_record().body) == vector["body_crc32"]


def test_decoding_the_vector_bytes_gives_the_vector_fields() -> None:
    assert decode_record(bytes.fromhex(VECTORS["message_record"]["hex"])) == vector_record()


def test_blank_matches_vector() -> None:
    vector = VECTORS["end_of_segment_blank"]
    assert encode_blank(vector["remaining_bytes"]).hex() == vector["hex"]
    assert len(encode_blank(vector["remaining_bytes"])) == BLANK_SIZE_BYTES
    assert int(vector["hex"][8:], 16) == BLANK_MAGIC
    with pytest.raises(ValueError):
        encode_blank(BLANK_SIZE_BYTES - 1)


def test_record_crc_trailer_is_a_last_property_and_is_stripped_on_decode() -> None:
    plain = encode_record(vector_record(), record_crc=False)
    protected = encode_record(vector_record())
    assert len(protected) == len(plain) + RECORD_CRC_TRAILER_BYTES
    assert protected[-RECORD_CRC_TRAILER_BYTES:].startswith(b"__CRC32#\x01")
    assert protected.endswith(b"\x02")
    assert decode_record(protected, require_record_crc=True) == vector_record()


def test_a_record_without_trailer_is_refused_when_the_trailer_is_required() -> None:
    plain = encode_record(vector_record(), record_crc=False)
    with pytest.raises(CorruptRecordError, match="trailer"):
        decode_record(plain, require_record_crc=True)


def test_a_user_key_merely_ending_in_the_reserved_name_is_not_a_trailer() -> None:
    rec = make_record(properties=(("x__CRC32#", "0123456789"),))
    encoded = encode_record(rec, record_crc=False)
    assert decode_record(encoded) == rec
    with pytest.raises(CorruptRecordError, match="trailer"):
        decode_record(encoded, require_record_crc=True)


def test_ipv6_hosts_set_their_sys_flag_bits_and_take_20_bytes() -> None:
    v4 = make_record()
    v6 = make_record(born_host=("::1", 1), store_host=("2001:db8::7", 10911), sys_flag=0x1)
    assert v6.sys_flag == 0x1 | SYS_FLAG_BORN_HOST_V6 | SYS_FLAG_STORE_HOST_V6
    # A flag claiming IPv6 for an IPv4 host is corrected, so the two can never disagree.
    assert make_record(sys_flag=SYS_FLAG_BORN_HOST_V6).sys_flag == 0
    encoded = encode_record(v6)
    assert len(encoded) == len(encode_record(v4)) + 2 * 12
    assert decode_record(encoded, require_record_crc=True) == v6


@settings(max_examples=150, deadline=None)
@given(records(), st.booleans())
def test_codec_round_trip(rec: MessageRecord, record_crc: bool) -> None:
    encoded = encode_record(rec, record_crc=record_crc)
    assert decode_record(encoded, require_record_crc=record_crc) == rec
    assert verify_record(encoded, require_record_crc=record_crc) == len(encoded)
    # At an offset inside a larger buffer too.
    assert decode_record(b"\xff" * 5 + encoded + b"\x00" * 3, 5) == rec


@settings(max_examples=30, deadline=None)
@given(records(), st.integers(1, 255))
def test_any_single_byte_change_of_a_protected_record_is_refused(
    rec: MessageRecord, delta: int
) -> None:
    """The guarantee the store relies on: with the trailer required, no single-byte change
    anywhere in the record decodes (structure check or one of the two CRCs catches it)."""
    encoded = encode_record(rec)
    for position in range(len(encoded)):
        damaged = bytearray(encoded)
        damaged[position] ^= delta
        with pytest.raises(CorruptRecordError):
            decode_record(damaged, require_record_crc=True)
        with pytest.raises(CorruptRecordError):
            verify_record(damaged, require_record_crc=True)


def test_without_the_trailer_a_header_change_decodes_to_a_different_record() -> None:
    """Why the trailer exists: the spec's body CRC does not cover queue_offset."""
    damaged = bytearray(encode_record(make_record(queue_offset=7), record_crc=False))
    damaged[27] ^= 0x01  # last byte of queue_offset
    assert decode_record(damaged).queue_offset == 6


def test_body_change_is_caught_by_the_body_crc_even_without_trailer() -> None:
    damaged = bytearray(encode_record(make_record(), record_crc=False))
    damaged[100] ^= 0x40
    with pytest.raises(CorruptRecordError, match="body CRC"):
        decode_record(damaged)


@pytest.mark.parametrize(
    ("position", "value", "message"),
    [
        (4, b"\x00\x00\x00\x00", "magic"),
        (0, b"\x00\x00\x00\x10", "total_size"),
        (0, b"\x7f\x00\x00\x00", "total_size"),
    ],
)
def test_structure_errors(position: int, value: bytes, message: str) -> None:
    damaged = bytearray(encode_record(make_record()))
    damaged[position : position + len(value)] = value
    with pytest.raises(CorruptRecordError, match=message):
        decode_record(damaged)


def test_truncated_buffer_is_refused() -> None:
    encoded = encode_record(make_record())
    for cut in (0, 10, 90, len(encoded) - 1):
        with pytest.raises(CorruptRecordError):
            decode_record(encoded[:cut])


def test_patch_record_stamps_fields_and_refreshes_the_trailer() -> None:
    for rec in (make_record(), make_record(born_host=("::1", 5))):
        buf = bytearray(b"\x00" * 3 + encode_record(rec))
        patch_record(buf, 3, queue_offset=42, physical_offset=8192, store_timestamp_ms=99)
        patched = decode_record(buf, 3, require_record_crc=True)
        assert (patched.queue_offset, patched.physical_offset, patched.store_timestamp_ms) == (
            42,
            8192,
            99,
        )
        assert read_store_timestamp_ms(buf, 3) == 99
        assert patched.body == rec.body and patched.born_host == rec.born_host


def test_patch_record_without_trailer_leaves_properties_alone() -> None:
    buf = bytearray(encode_record(vector_record(), record_crc=False))
    patch_record(buf, 0, queue_offset=1, physical_offset=2, store_timestamp_ms=3)
    assert decode_record(buf).properties == vector_record().properties


def test_dispatch_info_reads_what_the_dispatcher_needs() -> None:
    rec = make_record(
        queue_offset=5,
        physical_offset=4096,
        properties=(("KEYS", "k1  k2 "), ("TAGS", "tagA"), ("UNIQ_KEY", "U1"), ("X", "y")),
    )
    encoded = encode_record(rec)
    info = read_dispatch_info(memoryview(b"\x00" + encoded), 1)
    assert info == DispatchInfo(
        "orders", 1, 5, 4096, len(encoded), rec.store_timestamp_ms, "tagA", ("k1", "k2"), "U1"
    )
    bare = read_dispatch_info(encode_record(make_record(properties=()), record_crc=False))
    assert (bare.tags, bare.keys, bare.uniq_key) == ("", (), "")


def test_record_helpers() -> None:
    rec = make_record(properties=(("KEYS", "a b"), ("TAGS", "t")))
    assert rec.get_property("TAGS") == "t"
    assert rec.get_property("NOPE") is None
    assert rec.keys == ("a", "b")
    assert rec.tags == "t"
    assert int.from_bytes(encode_record(rec)[4:8], "big") == MESSAGE_MAGIC


def test_properties_codec() -> None:
    pairs = (("KEYS", "k1 k2"), ("TAGS", ""), ("", "v"))
    assert encode_properties(pairs) == b"KEYS\x01k1 k2\x02TAGS\x01\x02\x01v\x02"
    assert decode_properties(encode_properties(pairs)) == pairs
    assert decode_properties(b"") == ()
    for bad in (b"KEYS\x01v", b"KEYS\x02", b"a\x01b\x01c\x02", b"\xff\x01v\x02"):
        with pytest.raises(CorruptRecordError):
            decode_properties(bad)


def test_encode_refuses_what_the_format_cannot_hold() -> None:
    with pytest.raises(ValueError, match="topic"):
        encode_record(make_record(topic="t" * 256))
    with pytest.raises(ValueError, match="properties"):
        encode_record(make_record(properties=(("k", "v" * 70000),)))
    with pytest.raises(ValueError, match="address"):
        encode_record(make_record(born_host=("not-an-ip", 1)))
