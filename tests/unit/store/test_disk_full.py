"""A full disk (ENOSPC part way through a write) refuses the write cleanly: DiskFullError,
nothing of it left in the CommitLog (not even after a power loss), and the next write, once
space is back, lands where the refused one would have.

The simulated disk (``SimFileSystem.capacity_bytes``) writes what fits of a ``pwrite`` and
then raises ENOSPC, as a real ``write(2)`` that runs out of space part way does."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from raftlog.store.commit_log import CommitLog
from raftlog.store.errors import DiskFullError
from raftlog.store.message_store import Message
from raftlog.store.record import encode_record
from tests.support import make_record, stamp_block
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.store.test_commit_log import encoded, fill, open_log, segment_path
from tests.unit.store.test_message_store import open_store

SEGMENT_BYTES = 1024


def block_of(log: CommitLog, body_sizes: list[int], first_queue_offset: int) -> bytearray:
    """Records with ``body_sizes`` stamped at the place the log would write them."""
    records = [encoded(size) for size in body_sizes]
    position = log.position_for(sum(len(r) for r in records))
    block, _ = stamp_block(position, records, first_queue_offset=first_queue_offset)
    return block


def records_of(log: CommitLog) -> list[tuple[int, bytes]]:
    return [(offset, bytes(data)) for offset, data in log.scan(log.min_offset, log.max_offset)]


def reopened(fs: SimFileSystem) -> CommitLog:
    log = open_log(fs, segment_size_bytes=SEGMENT_BYTES)
    log.recover(log.min_offset)
    return log


def test_enospc_part_way_through_a_block_keeps_nothing_of_it() -> None:
    fs = SimFileSystem()
    log = open_log(fs, segment_size_bytes=SEGMENT_BYTES)
    fill(log, 2)
    log.flush()
    before_bytes, before_records = fs.read_bytes(segment_path(0)), records_of(log)
    end = log.max_offset
    fs.capacity_bytes = fs.used_bytes() + 150  # the first record and part of the second
    with pytest.raises(DiskFullError, match="no space left on the device"):
        log.append(block_of(log, [100, 100, 100], first_queue_offset=2))
    assert log.max_offset == end
    assert fs.read_bytes(segment_path(0)) == before_bytes
    assert records_of(reopened(fs)) == before_records
    fs.capacity_bytes = None
    assert log.append(block_of(log, [100], first_queue_offset=2)) == end


def test_a_refused_block_never_comes_back_after_a_shorter_write_and_a_power_loss() -> None:
    """The refused block's first two records fit whole. Without the cut, a later write as
    long as the first one leaves the second whole behind it, with its physical offset right:
    recovery would keep a record that was refused."""
    fs = SimFileSystem()
    log = open_log(fs, segment_size_bytes=SEGMENT_BYTES)
    fill(log, 1)
    log.flush()
    end = log.max_offset
    record_bytes = len(encoded(100))
    fs.capacity_bytes = fs.used_bytes() + 2 * record_bytes + 20
    with pytest.raises((DiskFullError, OSError)):
        log.append(block_of(log, [100, 100, 100], first_queue_offset=1))
    fs.capacity_bytes = None
    assert log.append(block_of(log, [100], first_queue_offset=1)) == end
    log.flush()
    fs.power_loss(random.Random(7))
    recovered = reopened(fs)
    assert recovered.max_offset == end + record_bytes
    assert [offset for offset, _ in records_of(recovered)] == [0, end]


@pytest.mark.parametrize("seed", range(8))
def test_a_power_loss_right_after_a_refused_write_recovers_the_log_before_it(seed: int) -> None:
    fs = SimFileSystem()
    log = open_log(fs, segment_size_bytes=SEGMENT_BYTES)
    fill(log, 3)
    log.flush()
    before = records_of(log)
    rng = random.Random(seed)
    fs.capacity_bytes = fs.used_bytes() + rng.randint(0, 3 * len(encoded(100)))
    with pytest.raises(DiskFullError):
        log.append(block_of(log, [100, 100, 100, 100], first_queue_offset=3))
    fs.power_loss(rng)
    assert records_of(reopened(fs)) == before


def test_enospc_while_rolling_removes_the_new_segment_and_the_blank() -> None:
    fs = SimFileSystem()
    log = open_log(fs, segment_size_bytes=SEGMENT_BYTES)
    record_bytes = len(encoded(100))
    fill(log, SEGMENT_BYTES // record_bytes)  # the next record does not fit: it rolls
    log.flush()
    end, first_segment = log.max_offset, fs.read_bytes(segment_path(0))
    fs.capacity_bytes = fs.used_bytes() + 60  # the blank fits, the rolled block does not
    block = block_of(log, [100], first_queue_offset=6)
    with pytest.raises(DiskFullError):
        log.append(block)
    assert log.max_offset == end and log.segment_count == 1
    assert not fs.exists(segment_path(SEGMENT_BYTES))
    assert fs.read_bytes(segment_path(0)) == first_segment
    fs.capacity_bytes = None
    assert log.append(block) == SEGMENT_BYTES
    log.flush()
    assert [offset for offset, _ in records_of(reopened(fs))][-1] == SEGMENT_BYTES


def test_a_record_written_after_the_refusal_is_read_back_whole() -> None:
    fs = SimFileSystem()
    log = open_log(fs, segment_size_bytes=SEGMENT_BYTES)
    fill(log, 1)
    fs.capacity_bytes = fs.used_bytes() + 10
    with pytest.raises(DiskFullError):
        log.append(block_of(log, [300], first_queue_offset=1))
    fs.capacity_bytes = None
    record = make_record(body=b"after", queue_offset=1)
    position = log.max_offset
    block, _ = stamp_block(position, [bytearray(encode_record(record))], first_queue_offset=1)
    log.append(block)
    assert log.read_record(position).body == b"after"


def test_the_store_refuses_a_write_the_disk_cannot_hold_and_takes_the_next(
    tmp_path: Path,
) -> None:
    """Through the MessageStore: DiskFullError (RESOURCE_EXHAUSTED to a client), no queue
    offset used up, the reads and a reopened store see only whole, acknowledged records."""
    fs = SimFileSystem()
    store = open_store(tmp_path, fs)
    store.create_topic("t", 1)
    store.put_messages([Message("t", 0, b"a%d" % i) for i in range(3)])
    end = store.commit_log.max_offset
    fs.capacity_bytes = fs.used_bytes() + 120
    with pytest.raises(DiskFullError, match="nothing of the write was kept"):
        store.put_messages([Message("t", 0, b"x" * 80) for _ in range(3)])
    assert store.commit_log.max_offset == end
    fs.capacity_bytes = None
    assert store.put_message(Message("t", 0, b"after")).queue_offset == 3
    expected = [b"a0", b"a1", b"a2", b"after"]
    assert [m.body for m in store.get_messages("t", 0, 0, 10)] == expected
    store.close()
    again = open_store(tmp_path, fs)
    assert [m.body for m in again.get_messages("t", 0, 0, 10)] == expected
    again.close()
