"""The fast pull's store side and codec: ``MessageStore.get_record_bytes`` answers exactly the
records ``get_messages`` answers (same limits, tag filter and next offsets) as their stored
bytes; a record whose size, magic or physical offset disagrees with its unit is refused there;
``decode_records`` gives every field back and refuses any damaged byte (real files)."""

from pathlib import Path

import pytest

from raftlog.store.errors import CorruptRecordError
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import Message, MessageStore
from raftlog.store.record import (
    DecodedRecord,
    MessageRecord,
    cut_records,
    decode_record,
    decode_records,
    encode_record,
    pack_address,
    unpack_address,
)
from raftlog.store.segment import segment_file_name
from tests.support import make_record
from tests.unit.store.test_message_store import open_store

SEGMENT_SIZE_BYTES = 4096


def filled(tmp_path: Path) -> tuple[MessageStore, list[int]]:
    """300 messages over 3 queues and several segments; the physical offsets in order."""
    store = open_store(tmp_path, OsFileSystem(), segment_size_bytes=SEGMENT_SIZE_BYTES)
    store.create_topic("t", 3)
    results = store.put_messages(
        [
            Message(
                "t",
                i % 3,
                b"m%03d-" % i + b"y" * (i % 40),
                tags=f"g{i % 4}",
                keys=(f"k{i}",),
                properties=(("p", str(i)),),
            )
            for i in range(300)
        ]
    )
    return store, [r.physical_offset for r in results]


def as_record(decoded: DecodedRecord) -> MessageRecord:
    """The MessageRecord ``decode_record`` would give for the same bytes."""
    return MessageRecord(
        topic=decoded.topic,
        queue_id=decoded.queue_id,
        flag=decoded.flag,
        queue_offset=decoded.queue_offset,
        physical_offset=decoded.physical_offset,
        sys_flag=decoded.sys_flag,
        born_timestamp_ms=decoded.born_timestamp_ms,
        born_host=(unpack_address(decoded.born_address), decoded.born_port),
        store_timestamp_ms=decoded.store_timestamp_ms,
        store_host=(unpack_address(decoded.store_address), decoded.store_port),
        reconsume_times=decoded.reconsume_times,
        prepared_transaction_offset=decoded.prepared_transaction_offset,
        body=decoded.body,
        properties=decoded.properties,
    )


@pytest.mark.parametrize(
    ("tags", "max_messages", "max_bytes"),
    [
        (None, 1000, 1 << 30),
        (None, 7, 1 << 30),
        (None, 1000, 300),
        (None, 1000, 1),  # at least one message
        (frozenset({"g1"}), 1000, 1 << 30),
        (frozenset({"g1", "g2"}), 5, 1 << 30),
        (frozenset({"nope"}), 1000, 1 << 30),
    ],
)
def test_record_bytes_answer_what_get_messages_answers(
    tmp_path: Path, tags: frozenset[str] | None, max_messages: int, max_bytes: int
) -> None:
    store, _ = filled(tmp_path)
    for queue_id in range(3):
        offset = 0
        for _ in range(200):  # page through the queue with these limits
            raw = store.get_record_bytes("t", queue_id, offset, max_messages, max_bytes, tags)
            if tags is None or len(tags) == 1:
                tag = None if tags is None else next(iter(tags))
                expected = store.get_messages("t", queue_id, offset, max_messages, max_bytes, tag)
                assert raw.next_queue_offset == expected.next_queue_offset
                expected_records = expected.messages
            else:
                everything = store.get_messages("t", queue_id, offset, 1000, 1 << 30)
                expected_records = [m for m in everything if m.tags in tags][:max_messages]
            decoded = decode_records(raw.records)
            assert raw.count == len(decoded)
            assert [as_record(d) for d in decoded] == expected_records
            # The bytes are exactly what lies in the CommitLog.
            assert raw.records == b"".join(
                store.commit_log.read(d.physical_offset, d.size_bytes) for d in decoded
            )
            assert (raw.min_queue_offset, raw.max_queue_offset) == (0, 100)
            if raw.next_queue_offset == offset:
                break
            offset = raw.next_queue_offset
        assert offset == 100
    store.close()


def damage(tmp_path: Path, physical_offset: int, at: int) -> None:
    segment_start = physical_offset - physical_offset % SEGMENT_SIZE_BYTES
    path = tmp_path / "commitlog" / segment_file_name(segment_start)
    data = bytearray(path.read_bytes())
    data[physical_offset - segment_start + at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("at", "mentions"),
    [(2, "total_size"), (5, "magic"), (33, "physical_offset")],
    ids=["size", "magic", "physical-offset"],
)
def test_a_record_that_disagrees_with_its_unit_is_refused(
    tmp_path: Path, at: int, mentions: str
) -> None:
    store, offsets = filled(tmp_path)
    damage(tmp_path, offsets[30], at)  # queue 0, in the middle of a run
    with pytest.raises(CorruptRecordError, match=mentions):
        store.get_record_bytes("t", 0, 0, 1000, 1 << 30)
    store.close()


def test_a_damaged_body_passes_the_store_and_is_refused_by_the_decoder(tmp_path: Path) -> None:
    store, offsets = filled(tmp_path)
    damage(tmp_path, offsets[30], 100)
    raw = store.get_record_bytes("t", 0, 0, 1000, 1 << 30)
    with pytest.raises(CorruptRecordError, match=r"record 10: .*body CRC"):
        decode_records(raw.records)
    store.close()


RECORDS = [
    make_record(queue_offset=0, physical_offset=0, body=b"a", properties=(("TAGS", "x"),)),
    make_record(
        queue_offset=1,
        physical_offset=500,
        body=b"b" * 300,
        born_host=("fe80::1", 1),
        store_host=("2001:db8::7", 10911),
        flag=9,
        reconsume_times=2,
        prepared_transaction_offset=77,
        properties=(("KEYS", "k1 k2"), ("UNIQ_KEY", "u"), ("x", "")),
    ),
    make_record(queue_offset=2, physical_offset=900, body=b""),
]


def test_decode_records_gives_every_field_of_every_record() -> None:
    batch = b"".join(encode_record(r) for r in RECORDS)
    decoded = decode_records(batch)
    assert [as_record(d) for d in decoded] == [decode_record(encode_record(r)) for r in RECORDS]
    assert [d.size_bytes for d in decoded] == [len(encode_record(r)) for r in RECORDS]
    assert decoded[1].store_address == pack_address("2001:db8::7")
    assert decode_records(b"") == []


def test_decode_records_refuses_every_damaged_byte() -> None:
    record = encode_record(RECORDS[1])
    batch = encode_record(RECORDS[0]) + record
    first_size = len(batch) - len(record)
    for at in range(len(record)):
        damaged = bytearray(batch)
        damaged[first_size + at] ^= 0x01
        with pytest.raises(CorruptRecordError, match="record 1: "):
            decode_records(damaged)


def test_decode_records_refuses_a_truncated_batch_and_a_record_without_its_trailer() -> None:
    batch = b"".join(encode_record(r) for r in RECORDS)
    with pytest.raises(CorruptRecordError, match="record 2: "):
        decode_records(batch[:-1])
    with pytest.raises(CorruptRecordError, match="__CRC32#"):
        decode_records(encode_record(RECORDS[0], record_crc=False))


def test_cut_records_names_what_disagrees_with_the_unit() -> None:
    record = encode_record(RECORDS[1])  # physical_offset 500
    data = memoryview(b"\0" * 100 + record + b"\0" * 8)
    (cut,) = cut_records(data, 400, [(500, len(record))])
    assert cut == record
    for data_offset, offset, size, mentions in (
        (400, 500, len(record) - 1, "total_size"),
        (401, 501, len(record), "physical_offset 500"),  # it lies elsewhere than it says
        (400, 500, len(record) + 9, "were read"),
        (400, 500, 3, "at least"),
        (400, 399, len(record), "were read"),
    ):
        with pytest.raises(CorruptRecordError, match=mentions):
            cut_records(data, data_offset, [(offset, size)])
