import random

import pytest

from raftlog.store.checkpoint import (
    CHECKPOINT_SIZE_BYTES,
    Checkpoint,
    checkpoint_path,
    decode_checkpoint,
    encode_checkpoint,
    load_checkpoint,
    recovery_start_offset,
    save_checkpoint,
)
from raftlog.store.filesystem import OsFileSystem
from tests.support.sim_filesystem import SimFileSystem

ROOT = "/store"
CHECKPOINT = Checkpoint(
    flushed_physical_offset=4096,
    dispatched_physical_offset=2048,
    flushed_timestamp_ms=1_764_000_000_123,
    index_timestamp_ms=1_764_000_000_100,
)


def test_round_trip_in_a_fixed_40_byte_layout() -> None:
    data = encode_checkpoint(CHECKPOINT)
    assert len(data) == CHECKPOINT_SIZE_BYTES == 40
    assert data[:4] == b"RLCP"
    assert decode_checkpoint(data) == CHECKPOINT


def test_save_then_load_on_a_real_disk(tmp_path) -> None:
    fs = OsFileSystem()
    assert load_checkpoint(fs, str(tmp_path)) is None
    save_checkpoint(fs, str(tmp_path), CHECKPOINT)
    assert load_checkpoint(fs, str(tmp_path)) == CHECKPOINT
    later = Checkpoint(8192, 8192, 2, 2)
    save_checkpoint(fs, str(tmp_path), later)
    assert load_checkpoint(fs, str(tmp_path)) == later


@pytest.mark.parametrize("position", range(CHECKPOINT_SIZE_BYTES))
def test_any_damaged_byte_reads_as_unknown(position: int) -> None:
    data = bytearray(encode_checkpoint(CHECKPOINT))
    data[position] ^= 0x20
    assert decode_checkpoint(bytes(data)) is None


def test_short_long_or_foreign_files_read_as_unknown() -> None:
    data = encode_checkpoint(CHECKPOINT)
    assert decode_checkpoint(data[:-1]) is None
    assert decode_checkpoint(data + b"\x00") is None
    assert decode_checkpoint(b"") is None
    fs = SimFileSystem()
    fs.makedirs(ROOT)
    fs.open(checkpoint_path(ROOT)).pwrite(b"\x00" * 40, 0)
    assert load_checkpoint(fs, ROOT) is None


def test_a_saved_checkpoint_survives_power_loss_and_an_unsaved_one_never_tears() -> None:
    fs = SimFileSystem()
    save_checkpoint(fs, ROOT, CHECKPOINT)
    fs.power_loss(random.Random(0))
    assert load_checkpoint(fs, ROOT) == CHECKPOINT
    for seed in range(20):
        fs = SimFileSystem()
        save_checkpoint(fs, ROOT, CHECKPOINT)
        # Crash in the middle of the next save: the temp file is written but not renamed.
        handle = fs.open(checkpoint_path(ROOT) + ".tmp")
        handle.pwrite(encode_checkpoint(Checkpoint(1, 1, 1, 1)), 0)
        fs.power_loss(random.Random(seed))
        assert load_checkpoint(fs, ROOT) == CHECKPOINT


def test_recovery_starts_at_the_checkpoint_or_the_oldest_kept_byte() -> None:
    assert recovery_start_offset(CHECKPOINT, 0) == 4096
    assert recovery_start_offset(CHECKPOINT, 1 << 20) == 1 << 20  # retention passed it
    assert recovery_start_offset(None, 1 << 30) == 1 << 30
