import os
import struct
import zlib
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftlog.store.commit_log import CommitLog, Envelope
from raftlog.store.errors import CorruptRecordError, FlushFailedError, InvalidOffsetError
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.record import BLANK_MAGIC, decode_record, encode_record, patch_record
from tests.support import (
    CRC_ENVELOPE,
    CRC_ENVELOPE_HEADER,
    CRC_ENVELOPE_MAGIC,
    crc_envelope_ok,
    make_record,
    stamp_block,
)
from tests.support.sim_filesystem import SimFileSystem

DIRECTORY = "/store/commitlog"
SEGMENT_BYTES = 1024


def open_log(fs: SimFileSystem | OsFileSystem, directory: str = DIRECTORY, **kwargs) -> CommitLog:
    kwargs.setdefault("segment_size_bytes", SEGMENT_BYTES)
    return CommitLog(fs, directory, **kwargs)


def encoded(body_bytes: int = 100, queue_offset: int = 0, **overrides) -> bytearray:
    return bytearray(
        encode_record(make_record(body=b"b" * body_bytes, queue_offset=queue_offset, **overrides))
    )


def append_record(log: CommitLog, body_bytes: int = 100, queue_offset: int = 0) -> int:
    """Append one record stamped with its real position; returns that position."""
    record = encoded(body_bytes)
    position = log.position_for(len(record))
    block, _ = stamp_block(position, [record], first_queue_offset=queue_offset)
    assert log.append(block) == position
    return position


def fill(log: CommitLog, count: int, body_bytes: int = 100) -> list[int]:
    return [append_record(log, body_bytes, queue_offset=i) for i in range(count)]


def segment_path(start: int) -> str:
    return f"{DIRECTORY}/{start:020d}"


# ------------------------------------------------------------------ append and read


def test_append_then_read_record_back() -> None:
    log = open_log(SimFileSystem())
    assert (log.min_offset, log.max_offset, log.flushed_offset) == (0, 0, 0)
    positions = fill(log, 3)
    for queue_offset, position in enumerate(positions):
        record = log.read_record(position)
        assert (record.queue_offset, record.physical_offset) == (queue_offset, position)
    assert log.max_offset == positions[-1] + len(encoded())
    assert log.read(positions[1], 8)[4:8] == bytes.fromhex("daa320a7")


def test_rolling_writes_a_blank_and_continues_in_the_next_segment() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    size = len(encoded(300))
    positions = fill(log, 5, body_bytes=300)
    per_segment = SEGMENT_BYTES // size
    assert positions[per_segment] == SEGMENT_BYTES
    segment_count = -(-5 // per_segment)
    assert fs.listdir(DIRECTORY) == [f"{k * SEGMENT_BYTES:020d}" for k in range(segment_count)]
    first = fs.read_bytes(segment_path(0))
    blank_at = per_segment * size
    assert struct.unpack_from(">iI", first, blank_at) == (SEGMENT_BYTES - blank_at, BLANK_MAGIC)
    assert len(first) == blank_at + 8
    assert [p for p, _ in log.scan(0, log.max_offset)] == positions
    assert [log.read_record(p).queue_offset for p in positions] == list(range(5))


def test_a_block_that_leaves_under_eight_bytes_rolls_without_a_blank() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    size = len(encoded(0))
    # One record that leaves exactly 5 bytes in the first segment: no room for a blank.
    first = append_record(log, body_bytes=SEGMENT_BYTES - size - 5)
    second = append_record(log)
    assert (first, second) == (0, SEGMENT_BYTES)
    assert fs.file_size(segment_path(0)) == SEGMENT_BYTES - 5
    assert [p for p, _ in log.scan(0, log.max_offset)] == [0, SEGMENT_BYTES]
    assert log.recover(0) == log.max_offset


def test_a_block_of_exactly_one_segment_fits_and_a_larger_one_is_refused() -> None:
    log = open_log(SimFileSystem())
    append_record(log)
    whole = append_record(log, body_bytes=SEGMENT_BYTES - len(encoded(0)))
    assert whole == SEGMENT_BYTES
    assert log.max_offset == 2 * SEGMENT_BYTES
    with pytest.raises(ValueError):
        log.position_for(SEGMENT_BYTES + 1)
    with pytest.raises(ValueError):
        log.position_for(0)


def test_append_refuses_a_block_that_is_not_an_item() -> None:
    log = open_log(SimFileSystem())
    with pytest.raises(CorruptRecordError):
        log.append(b"\x00" * 64)
    assert log.max_offset == 0


def test_reads_outside_the_log_are_refused() -> None:
    log = open_log(SimFileSystem())
    positions = fill(log, 5, body_bytes=300)
    with pytest.raises(InvalidOffsetError):
        log.read_record(log.max_offset)
    with pytest.raises(InvalidOffsetError):
        log.read_record(-1)
    with pytest.raises(InvalidOffsetError):
        log.read(positions[-1], 10_000)
    with pytest.raises(InvalidOffsetError):
        log.read(SEGMENT_BYTES - 4, 8)  # straddles two segments
    with pytest.raises(CorruptRecordError):
        log.read_record(positions[1] + 4)  # not a record boundary


def test_read_record_checks_the_physical_offset_field() -> None:
    log = open_log(SimFileSystem())
    record = encoded()
    patch_record(record, 0, queue_offset=0, physical_offset=4096, store_timestamp_ms=1)
    log.append(record)
    with pytest.raises(CorruptRecordError, match="says it lies at 4096"):
        log.read_record(0)


def test_records_larger_than_the_first_read_guess_are_read_whole() -> None:
    log = open_log(SimFileSystem(), segment_size_bytes=1 << 16)
    position = append_record(log, body_bytes=10_000)
    assert log.read_record(position).body == b"b" * 10_000


# ------------------------------------------------------------------ corruption


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_any_single_byte_change_of_a_stored_record_is_refused_at_its_position(data) -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    positions = fill(log, 3)
    size = len(encoded())
    index = data.draw(st.integers(0, size - 1))
    delta = data.draw(st.integers(1, 255))
    original = fs.read_bytes(segment_path(0))
    fs.corrupt(
        segment_path(0), positions[1] + index, bytes([original[positions[1] + index] ^ delta])
    )
    with pytest.raises(CorruptRecordError):
        log.read_record(positions[1])
    assert log.read_record(positions[0]).queue_offset == 0
    assert log.read_record(positions[2]).queue_offset == 2


def test_the_guarantee_needs_the_trailer_so_the_log_refuses_records_without_one() -> None:
    log = open_log(SimFileSystem())
    plain = bytearray(encode_record(make_record(), record_crc=False))
    log.append(plain)
    with pytest.raises(CorruptRecordError, match="trailer"):
        log.read_record(0)
    relaxed = open_log(SimFileSystem(), require_record_crc=False)
    relaxed.append(plain)
    assert relaxed.read_record(0) == make_record()


# ------------------------------------------------------------------ truncation


def test_truncate_after_mid_segment_drops_the_rest_and_later_segments() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    positions = fill(log, 12, body_bytes=100)
    log.flush()
    log.truncate_after(positions[2])
    assert log.max_offset == positions[2]
    assert log.flushed_offset == positions[2]
    assert fs.listdir(DIRECTORY) == [f"{0:020d}"]
    assert fs.file_size(segment_path(0)) == positions[2]
    assert [p for p, _ in log.scan(0, 1 << 30)] == positions[:2]
    # Appending continues right there.
    assert append_record(log, body_bytes=100, queue_offset=2) == positions[2]
    assert log.read_record(positions[2]).queue_offset == 2


def test_truncate_at_a_segment_start_keeps_the_earlier_segment_whole() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    positions = fill(log, 12, body_bytes=100)
    log.truncate_after(SEGMENT_BYTES)
    assert log.max_offset == SEGMENT_BYTES
    assert [p for p, _ in log.scan(0, 1 << 30)] == [p for p in positions if p < SEGMENT_BYTES]
    assert fs.file_size(segment_path(SEGMENT_BYTES)) == 0
    assert append_record(log, body_bytes=100) == SEGMENT_BYTES


def test_truncate_outside_the_log_is_refused() -> None:
    log = open_log(SimFileSystem())
    fill(log, 2)
    with pytest.raises(InvalidOffsetError):
        log.truncate_after(log.max_offset + 1)
    with pytest.raises(InvalidOffsetError):
        log.truncate_after(-1)


def test_truncation_is_durable_at_once() -> None:
    import random

    fs = SimFileSystem()
    log = open_log(fs)
    positions = fill(log, 12, body_bytes=100)
    log.flush()
    log.truncate_after(positions[3])
    fs.power_loss(random.Random(1))
    reopened = open_log(fs)
    assert reopened.max_offset == positions[3]


# ------------------------------------------------------------------ recovery


def reopen_and_recover(fs: SimFileSystem, safe_offset: int = 0, **kwargs) -> CommitLog:
    log = open_log(fs, **kwargs)
    log.recover(safe_offset)
    return log


@pytest.mark.parametrize(
    "damage",
    ["cut_mid_record", "garbage", "zeros", "flipped_byte", "bad_blank", "bad_magic"],
)
def test_recover_truncates_a_torn_tail(damage: str) -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    positions = fill(log, 6, body_bytes=100)  # 4 in segment 0, 2 in segment 1
    size = len(encoded(100))
    log.flush()
    last_segment = segment_path(SEGMENT_BYTES)
    if damage == "cut_mid_record":
        log.close()
        handle = fs.open(last_segment)
        handle.truncate(size + 17)
        expected = positions[5]
    elif damage == "garbage":
        fs.corrupt(last_segment, 2 * size, b"\x13\x37" * 50)
        expected = log.max_offset
    elif damage == "zeros":
        fs.corrupt(last_segment, 2 * size, bytes(300))
        expected = log.max_offset
    elif damage == "flipped_byte":
        fs.corrupt(last_segment, 40, b"\xee")
        expected = positions[4]
    elif damage == "bad_blank":
        fs.corrupt(segment_path(0), 4 * size, struct.pack(">i", 12))
        expected = 4 * size
    else:
        fs.corrupt(segment_path(0), positions[3] + 4, b"\x00\x00\x00\x00")
        expected = positions[3]
    recovered = reopen_and_recover(fs)
    assert recovered.max_offset == expected
    assert recovered.flushed_offset == expected
    kept = [p for p in positions if p < expected]
    assert [p for p, _ in recovered.scan(0, 1 << 30)] == kept
    for position in kept:
        recovered.read_record(position)
    if expected <= SEGMENT_BYTES:
        assert fs.listdir(DIRECTORY) in ([f"{0:020d}"], [f"{0:020d}", f"{SEGMENT_BYTES:020d}"])
    # The next append lands at the recovered end (or the next segment) and reads back.
    position = append_record(recovered, body_bytes=100, queue_offset=99)
    assert recovered.read_record(position).queue_offset == 99


def test_recover_keeps_a_valid_log_whole_including_a_trailing_blank() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    fill(log, 4, body_bytes=100)
    append_record(log, body_bytes=100)  # rolls: blank at the end of segment 0
    log.truncate_after(SEGMENT_BYTES)  # leaves segment 0 ending with its blank
    end = log.max_offset
    log.flush()
    recovered = reopen_and_recover(fs)
    assert recovered.max_offset == end == SEGMENT_BYTES
    assert append_record(recovered, body_bytes=100) == SEGMENT_BYTES


def test_recover_from_a_safe_offset_does_not_rescan_below_it() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    positions = fill(log, 6, body_bytes=100)
    log.flush()
    # Damage below the safe offset is not looked at (it was verified when written).
    fs.corrupt(segment_path(0), positions[0] + 60, b"\xff")
    recovered = reopen_and_recover(fs, safe_offset=positions[2])
    assert recovered.max_offset == log.max_offset


def test_recover_on_an_empty_directory() -> None:
    log = open_log(SimFileSystem())
    assert log.recover(0) == 0
    assert append_record(log) == 0


def test_reopening_finds_the_end_and_refuses_misnamed_segments(tmp_path) -> None:
    fs = OsFileSystem()
    directory = str(tmp_path / "commitlog")
    log = open_log(fs, directory)
    positions = fill(log, 6, body_bytes=100)
    log.flush()
    log.close()
    reopened = open_log(fs, directory)
    assert reopened.max_offset == log.max_offset
    assert reopened.recover(0) == log.max_offset
    assert [p for p, _ in reopened.scan(0, 1 << 30)] == positions
    reopened.close()
    os.rename(f"{directory}/{SEGMENT_BYTES:020d}", f"{directory}/{3 * SEGMENT_BYTES:020d}")
    with pytest.raises(ValueError, match="contiguous"):
        open_log(fs, directory)


# ------------------------------------------------------------------ flush


def test_flush_syncs_dirty_segments_and_the_directory_once() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    fill(log, 6, body_bytes=100)
    assert log.flush() == log.max_offset == log.flushed_offset
    assert fs.sync_count[segment_path(0)] == 1
    assert fs.sync_count[segment_path(SEGMENT_BYTES)] == 1
    assert fs.dir_sync_count[DIRECTORY] == 1
    log.flush()  # nothing new: no fsync
    assert sum(fs.sync_count.values()) == 2
    append_record(log, body_bytes=100)
    log.flush()  # only the active segment
    assert fs.sync_count[segment_path(0)] == 1
    assert fs.sync_count[segment_path(SEGMENT_BYTES)] == 2


def test_a_failed_fsync_is_sticky() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    fill(log, 2)
    fs.fail_syncs = 1
    with pytest.raises(FlushFailedError, match="injected"):
        log.flush()
    assert log.flushed_offset == 0
    with pytest.raises(FlushFailedError, match="earlier fsync failed"):
        log.flush()


# ------------------------------------------------------------------ handles


def test_open_segment_handles_stay_bounded() -> None:
    fs = SimFileSystem()
    log = open_log(fs, max_open_segments=3)
    positions = fill(log, 40, body_bytes=100)
    log.flush()
    for position in reversed(positions):
        log.read_record(position)
    assert len(list(log.scan(0, 1 << 30))) == 40
    assert log.open_segment_count <= 3
    assert fs.max_open_handles <= 3
    assert fs.open_handles == log.open_segment_count
    log.close()
    assert fs.open_handles == 0


# ------------------------------------------------------------------ retention


def test_segments_report_size_and_newest_store_time() -> None:
    log = open_log(SimFileSystem())
    for queue_offset in range(6):
        record = encoded(100)
        position = log.position_for(len(record))
        patch_record(
            record,
            0,
            queue_offset=queue_offset,
            physical_offset=position,
            store_timestamp_ms=1000 + queue_offset,
        )
        log.append(record)
    infos = log.segments()
    assert [(i.start_offset, i.last_modified_ms) for i in infos] == [(0, 1003), (1024, 1005)]
    assert infos[0].path == segment_path(0)
    assert infos[1].size_bytes == 2 * len(encoded(100))


def test_only_the_oldest_non_active_segment_can_be_deleted() -> None:
    fs = SimFileSystem()
    log = open_log(fs)
    positions = fill(log, 14, body_bytes=100)
    with pytest.raises(ValueError, match="oldest"):
        log.delete_segment(SEGMENT_BYTES)
    log.delete_segment(0)
    assert log.min_offset == SEGMENT_BYTES
    assert not fs.exists(segment_path(0))
    with pytest.raises(InvalidOffsetError):
        log.read_record(positions[0])
    with pytest.raises(InvalidOffsetError):
        list(log.scan(0, 1 << 30))
    assert log.read_record(positions[4]).queue_offset == 4
    while len(log.segments()) > 1:
        log.delete_segment(log.min_offset)
    with pytest.raises(ValueError, match="active"):
        log.delete_segment(log.min_offset)
    assert log.read_record(positions[-1]).queue_offset == 13


# ------------------------------------------------------------------ envelopes


def append_envelope(log: CommitLog, queue_offsets: Sequence[int], body_bytes: int = 60) -> int:
    """An envelope of records, each stamped with its real position inside it."""
    records = [encoded(body_bytes) for _ in queue_offsets]
    start = log.position_for(CRC_ENVELOPE_HEADER.size + sum(len(r) for r in records))
    block, _ = stamp_block(start, records, in_envelope=True, first_queue_offset=queue_offsets[0])
    assert log.append(block) == start
    return start


def test_scan_steps_into_envelopes_and_reads_nested_records() -> None:
    log = open_log(SimFileSystem(), envelopes=[CRC_ENVELOPE])
    first = append_envelope(log, [0, 1, 2])
    plain = append_record(log, queue_offset=3)
    second = append_envelope(log, [4, 5])  # rolls into segment 1
    scanned = [(p, decode_record(v).queue_offset) for p, v in log.scan(0, 1 << 30)]
    assert [q for _, q in scanned] == [0, 1, 2, 3, 4, 5]
    assert scanned[0][0] == first + CRC_ENVELOPE_HEADER.size
    assert scanned[3][0] == plain
    assert second == SEGMENT_BYTES
    for position, queue_offset in scanned:
        assert log.read_record(position).queue_offset == queue_offset
    # From a record boundary inside an envelope, and with an end inside one.
    assert [
        decode_record(v).queue_offset for _, v in log.scan(scanned[1][0], scanned[2][0] + 1)
    ] == [1, 2]
    assert log.recover(0) == log.max_offset


def test_recover_truncates_an_envelope_that_fails_verification() -> None:
    fs = SimFileSystem()
    log = open_log(fs, envelopes=[CRC_ENVELOPE])
    append_envelope(log, [0, 1])
    second = append_envelope(log, [2, 3])
    log.flush()
    # A byte inside the second envelope's payload: its CRC (and the record's) catch it.
    fs.corrupt(segment_path(0), second + CRC_ENVELOPE_HEADER.size + 30, b"\x99")
    recovered = reopen_and_recover(fs, envelopes=[CRC_ENVELOPE])
    assert recovered.max_offset == second
    assert [decode_record(v).queue_offset for _, v in recovered.scan(0, 1 << 30)] == [0, 1]


def test_an_envelope_with_trailing_bytes_that_are_not_a_record_is_refused() -> None:
    log = open_log(SimFileSystem(), envelopes=[CRC_ENVELOPE])
    payload = bytes(encoded()) + b"\x00" * 10
    header = CRC_ENVELOPE_HEADER.pack(
        CRC_ENVELOPE_HEADER.size + len(payload), CRC_ENVELOPE_MAGIC, zlib.crc32(payload)
    )
    log.append(header + payload)
    with pytest.raises(CorruptRecordError):
        list(log.scan(0, 1 << 30))


def test_envelope_magic_must_be_new() -> None:
    with pytest.raises(ValueError):
        open_log(SimFileSystem(), envelopes=[Envelope(BLANK_MAGIC, 12, crc_envelope_ok)])
    with pytest.raises(ValueError):
        open_log(SimFileSystem(), envelopes=[CRC_ENVELOPE, CRC_ENVELOPE])


class CountingHandle:
    """Wraps a real handle; tells its file system when it closes."""

    def __init__(self, fs: "CountingFileSystem", handle) -> None:
        self._fs = fs
        self._handle = handle
        self.pwrite = handle.pwrite
        self.pread = handle.pread
        self.sync = handle.sync
        self.truncate = handle.truncate
        self.size = handle.size

    def close(self) -> None:
        self._fs.open_now -= 1
        self._handle.close()


class CountingFileSystem(OsFileSystem):
    """The real disk, counting the handles open at once."""

    def __init__(self) -> None:
        self.open_now = 0
        self.open_max = 0

    def open(self, path: str, create: bool = True) -> CountingHandle:  # type: ignore[override]
        handle = CountingHandle(self, super().open(path, create))
        self.open_now += 1
        self.open_max = max(self.open_max, self.open_now)
        return handle


def test_open_file_descriptors_stay_bounded_on_a_real_disk(tmp_path) -> None:
    fs = CountingFileSystem()
    log = open_log(fs, str(tmp_path / "commitlog"), max_open_segments=2)
    positions = fill(log, 30)
    log.flush()
    for position in positions[::-1]:
        assert log.read_record(position).physical_offset == position
    assert len(os.listdir(tmp_path / "commitlog")) == 8
    assert fs.open_max <= 2
    log.close()
    assert fs.open_now == 0
