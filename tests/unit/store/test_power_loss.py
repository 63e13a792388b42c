"""Power loss under group commit: whatever a crash does to unsynced bytes, recovery keeps every
acknowledged record intact, exposes no partial record, never brings back truncated data, and
leaves the log appendable.

Each seed drives a writer that appends blocks (plain records or CRC envelopes of records),
sometimes waits for the group commit to acknowledge them, sometimes truncates its unacknowledged
tail as Raft would, then cuts the power at a seeded point (dropping unsynced writes, tearing
the last one, sometimes zero-filling it), recovers, checks, and does it all twice.
"""

import contextlib
import os
import random
from dataclasses import dataclass

import pytest

from raftlog.store.commit_log import CommitLog
from raftlog.store.errors import InvalidOffsetError, StoreError
from raftlog.store.flusher import GroupCommitFlusher
from raftlog.store.record import encode_record
from tests.support import CRC_ENVELOPE, CRC_ENVELOPE_HEADER, make_record, stamp_block
from tests.support.sim_filesystem import SimFileSystem

DIRECTORY = "/store/commitlog"
SEGMENT_BYTES = 2048
SEEDS = int(os.environ.get("POWER_LOSS_SEEDS", "60"))


@dataclass
class Appended:
    physical_offset: int
    data: bytes
    # Where the item holding this record starts if it is the item's first record (a place
    # where truncation may cut), else None.
    item_start: int | None


def open_log(fs: SimFileSystem) -> CommitLog:
    return CommitLog(
        fs,
        DIRECTORY,
        segment_size_bytes=SEGMENT_BYTES,
        max_open_segments=3,
        envelopes=[CRC_ENVELOPE],
    )


def append_block(log: CommitLog, rng: random.Random, history: list[Appended]) -> None:
    records = [
        bytearray(encode_record(make_record(body=rng.randbytes(rng.randint(0, 300)))))
        for _ in range(rng.randint(1, 4))
    ]
    in_envelope = rng.random() < 0.5
    header_bytes = CRC_ENVELOPE_HEADER.size if in_envelope else 0
    start = log.position_for(header_bytes + sum(len(r) for r in records))
    block, positions = stamp_block(
        start, records, in_envelope=in_envelope, first_queue_offset=len(history)
    )
    assert log.append(block) == start
    for index, (position, record) in enumerate(zip(positions, records, strict=True)):
        # Plain records are items of their own; an envelope is one item.
        item_start = position if not in_envelope else (start if index == 0 else None)
        history.append(Appended(position, bytes(record), item_start))


def run_until_power_loss(
    fs: SimFileSystem, log: CommitLog, rng: random.Random, history: list[Appended]
) -> int:
    """Append, sometimes wait, sometimes truncate the unacknowledged tail; returns the end of
    the last acknowledged record."""
    flusher = GroupCommitFlusher(log)
    flusher.start()
    acked_end = 0
    for _ in range(rng.randint(1, 40)):
        append_block(log, rng, history)
        draw = rng.random()
        if draw < 0.4:
            end = history[-1].physical_offset + len(history[-1].data)
            flusher.wait_flushed(end, timeout_s=10)
            acked_end = end
        elif draw < 0.5:
            cuts = [
                index
                for index, appended in enumerate(history)
                if appended.item_start is not None and appended.item_start >= acked_end
            ]
            if cuts:
                index = rng.choice(cuts)
                cut_at = history[index].item_start
                assert cut_at is not None
                log.truncate_after(cut_at)
                del history[index:]
    fs.power_loss(rng)
    # The crashed process's flusher may trip over the dead handles; that is the crash.
    with contextlib.suppress(StoreError):
        flusher.stop()
    return acked_end


def check_recovered(log: CommitLog, history: list[Appended], acked_end: int) -> list[Appended]:
    """The recovered log is a prefix of what was appended, holding everything acknowledged;
    returns that prefix (the history the next cycle continues)."""
    scanned = [(p, bytes(v)) for p, v in log.scan(log.min_offset, log.max_offset)]
    kept = history[: len(scanned)]
    assert scanned == [(a.physical_offset, a.data) for a in kept], "not a prefix of the writes"
    kept_end = kept[-1].physical_offset + len(kept[-1].data) if kept else 0
    assert kept_end >= acked_end, "an acknowledged record was lost"
    for appended in kept:
        record = log.read_record(appended.physical_offset)
        assert record.physical_offset == appended.physical_offset
    # No partial record is readable: everything past the prefix is gone.
    for appended in history[len(kept) :]:
        with pytest.raises(InvalidOffsetError):
            log.read_record(appended.physical_offset)
    # max_offset is the prefix's end, or the next segment if a blank after it survived.
    segment_end = kept_end - kept_end % SEGMENT_BYTES + SEGMENT_BYTES
    assert log.max_offset in (kept_end, segment_end)
    assert log.flushed_offset == log.max_offset
    return kept


def power_loss_cycles(seed: int) -> None:
    rng = random.Random(seed)
    fs = SimFileSystem()
    history: list[Appended] = []
    safe_offset = 0
    for _ in range(2):
        log = open_log(fs)
        log.recover(safe_offset)
        history = check_recovered(log, history, 0)
        acked_end = run_until_power_loss(fs, log, rng, history)
        # Half the time recover from what a checkpoint would have said (a flushed boundary).
        safe_offset = rng.choice([0, acked_end])
        recovered = open_log(fs)
        recovered.recover(safe_offset)
        history = check_recovered(recovered, history, acked_end)
        # The recovered log is appendable at a record boundary.
        append_block(recovered, rng, history)
        recovered.flush()
        history = check_recovered(recovered, history, recovered.max_offset)
        recovered.close()
        safe_offset = recovered.max_offset


@pytest.mark.parametrize("seed", range(SEEDS))
def test_power_loss_keeps_every_acknowledged_record_and_no_partial_one(seed: int) -> None:
    power_loss_cycles(seed)


@pytest.mark.slow
def test_power_loss_soak() -> None:
    for seed in range(SEEDS, SEEDS + 2000):
        power_loss_cycles(seed)
