"""The entry envelope codec: round trips, every single-byte corruption refused, records that
name the wrong place refused, and the store stepping into (and recovering) envelopes."""

from __future__ import annotations

import pytest

from raftlog.node.replication.raft_entry import (
    CONF_ENTRY_MAGIC,
    CONF_ENTRY_SIZE_BYTES,
    ENTRY_ENVELOPES,
    ENTRY_HEADER_SIZE_BYTES,
    ENTRY_MAGIC,
    MAX_CONF_CHANGE_BYTES,
    decode_entry_header,
    encode_entry,
    entry_to_envelope,
    envelope_size_bytes,
    envelope_to_entry,
    verify_entry,
)
from raftlog.raft.types import ConfChange, ConfChangeType, Entry, EntryType
from raftlog.store.commit_log import CommitLog
from raftlog.store.errors import CorruptRecordError
from raftlog.store.record import decode_record
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.node.replication.entry_factory import payload_at

CONF_DATA = ConfChange(ConfChangeType.ADD_VOTER, "node-4").encode()


def test_normal_entry_round_trips_with_its_records() -> None:
    entry = Entry(7, 3, EntryType.NORMAL, payload_at(1000, [b"a", b"bb" * 50]))
    envelope = entry_to_envelope(entry, 1000)
    header = decode_entry_header(envelope)
    assert (header.total_size, header.magic, header.log_term, header.log_index) == (
        len(envelope),
        ENTRY_MAGIC,
        3,
        7,
    )
    assert verify_entry(memoryview(envelope))
    assert envelope_to_entry(envelope) == entry
    assert len(envelope) == envelope_size_bytes(EntryType.NORMAL, len(entry.data))


def test_noop_entry_is_a_bare_header() -> None:
    envelope = encode_entry(2, 9, EntryType.NORMAL, b"")
    assert len(envelope) == ENTRY_HEADER_SIZE_BYTES
    assert verify_entry(memoryview(envelope))
    assert envelope_to_entry(envelope) == Entry(9, 2)


def test_conf_change_entry_round_trips_in_its_own_envelope_kind() -> None:
    entry = Entry(4, 1, EntryType.CONF_CHANGE, CONF_DATA)
    envelope = entry_to_envelope(entry, 0)
    assert len(envelope) == CONF_ENTRY_SIZE_BYTES
    assert decode_entry_header(envelope).magic == CONF_ENTRY_MAGIC
    assert verify_entry(memoryview(envelope))
    assert envelope_to_entry(envelope) == entry
    assert ConfChange.decode(envelope_to_entry(envelope).data).node_id == "node-4"


def test_conf_change_too_large_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_entry(1, 1, EntryType.CONF_CHANGE, b"x" * (MAX_CONF_CHANGE_BYTES + 1))


@pytest.mark.parametrize(
    "envelope",
    [
        entry_to_envelope(Entry(7, 3, data=payload_at(64, [b"payload"])), 64),
        encode_entry(2, 9, EntryType.NORMAL, b""),
        encode_entry(5, 11, EntryType.CONF_CHANGE, CONF_DATA),
    ],
    ids=["records", "noop", "conf-change"],
)
def test_every_single_byte_corruption_is_detected(envelope: bytes) -> None:
    for position in range(len(envelope)):
        for flip in (0x01, 0x80, 0xFF):
            damaged = bytearray(envelope)
            damaged[position] ^= flip
            assert not verify_entry(memoryview(damaged)), (position, flip)


def test_truncated_or_extended_envelope_is_refused() -> None:
    envelope = entry_to_envelope(Entry(7, 3, data=payload_at(0, [b"x"])), 0)
    assert not verify_entry(memoryview(envelope[:-1]))
    assert not verify_entry(memoryview(envelope + b"\x00"))
    assert not verify_entry(memoryview(envelope[:10]))


def test_records_planned_for_another_position_are_refused() -> None:
    entry = Entry(1, 1, data=payload_at(100, [b"a", b"b"]))
    with pytest.raises(ValueError, match="planned for another position"):
        entry_to_envelope(entry, 132)
    with pytest.raises(ValueError, match="no whole record"):
        entry_to_envelope(Entry(1, 1, data=entry.data[:-3]), 100)


def test_commit_log_steps_into_entries_and_recovery_keeps_them() -> None:
    fs = SimFileSystem()
    log = CommitLog(fs, "/s/commitlog", 4096, envelopes=ENTRY_ENVELOPES)
    position = 0
    for index in range(1, 6):
        entry_type = EntryType.CONF_CHANGE if index == 3 else EntryType.NORMAL
        data = CONF_DATA if index == 3 else payload_at(position, [b"m%d" % index])
        written = log.append(entry_to_envelope(Entry(index, 1, entry_type, data), position))
        assert written == position
        position = log.max_offset
    records = [decode_record(view).body for _, view in log.scan(0, log.max_offset)]
    assert records == [b"m1", b"m2", b"m4", b"m5"]
    assert log.recover(0) == position


def test_recovery_cuts_at_a_corrupt_entry() -> None:
    fs = SimFileSystem()
    log = CommitLog(fs, "/s/commitlog", 4096, envelopes=ENTRY_ENVELOPES)
    first = entry_to_envelope(Entry(1, 1, data=payload_at(0, [b"one"])), 0)
    log.append(first)
    log.append(entry_to_envelope(Entry(2, 1, data=payload_at(len(first), [b"two"])), len(first)))
    log.flush()
    # The term field is covered by the entry CRC only (the records stay valid).
    fs.corrupt("/s/commitlog/00000000000000000000", len(first) + 15, b"\x09")
    assert log.recover(0) == len(first)
    with pytest.raises(CorruptRecordError):
        decode_entry_header(b"\x00" * 8)
