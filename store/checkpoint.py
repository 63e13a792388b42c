"""The checkpoint: how far the CommitLog is known durable and dispatched, in 40 bytes.

Layout (big-endian): magic ``RLCP``(4) | flushed_physical_offset(8) |
dispatched_physical_offset(8) | flushed_timestamp_ms(8) | index_timestamp_ms(8) | crc32(4) of
the 36 bytes before it. File ``<root>/checkpoint``.

Rules this module keeps:
- Written whole by write-temp + fsync + rename + directory fsync (atomic_file.py): a reader
  sees the old checkpoint or the new one, never a mix.
- Only facts go in: ``flushed_physical_offset`` is saved after the flush that reached it
  returned, ``dispatched_physical_offset`` after the ConsumeQueue/IndexFile writes below it
  were flushed. So everything below ``flushed_physical_offset`` survives power loss.
- A missing, short, foreign or CRC-failing checkpoint reads as None ("unknown"), never as
  zeros.

Where recovery starts (``recovery_start_offset``): at the checkpoint's flushed offset (clamped
to the oldest kept byte), else at the start of the oldest kept segment. RocketMQ instead
rescans only the last few segments when it knows nothing; that is faster but would accept an
undetected torn record in an earlier segment if the checkpoint was lost together with recent
data. An unknown checkpoint is rare (first start, or the file itself damaged), so the store
pays one full verification pass of the kept log to be sure.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from raftlog.store.atomic_file import read_file, write_atomically
from raftlog.store.filesystem import FileSystem

CHECKPOINT_FILE_NAME = "checkpoint"
_MAGIC = 0x524C4350  # "RLCP"
_BODY = struct.Struct(">Iqqqq")
_CRC = struct.Struct(">I")
CHECKPOINT_SIZE_BYTES = _BODY.size + _CRC.size


@dataclass(frozen=True, slots=True)
class Checkpoint:
    flushed_physical_offset: int
    dispatched_physical_offset: int
    flushed_timestamp_ms: int
    index_timestamp_ms: int


def checkpoint_path(root_dir: str) -> str:
    return f"{root_dir}/{CHECKPOINT_FILE_NAME}"


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    body = _BODY.pack(
        _MAGIC,
        checkpoint.flushed_physical_offset,
        checkpoint.dispatched_physical_offset,
        checkpoint.flushed_timestamp_ms,
        checkpoint.index_timestamp_ms,
    )
    return body + _CRC.pack(zlib.crc32(body))


def decode_checkpoint(data: bytes) -> Checkpoint | None:
    """The checkpoint in ``data``, or None if it is not exactly one intact checkpoint."""
    if len(data) != CHECKPOINT_SIZE_BYTES:
        return None
    (crc,) = _CRC.unpack_from(data, _BODY.size)
    if zlib.crc32(data[: _BODY.size]) != crc:
        return None
    magic, flushed, dispatched, flushed_ms, index_ms = _BODY.unpack_from(data, 0)
    if magic != _MAGIC:
        return None
    return Checkpoint(flushed, dispatched, flushed_ms, index_ms)


def save_checkpoint(fs: FileSystem, root_dir: str, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint durably and atomically."""
    write_atomically(fs, checkpoint_path(root_dir), encode_checkpoint(checkpoint))


def load_checkpoint(fs: FileSystem, root_dir: str) -> Checkpoint | None:
    """The saved checkpoint, or None when it is missing or damaged (see the module rules)."""
    data = read_file(fs, checkpoint_path(root_dir))
    return None if data is None else decode_checkpoint(data)


def recovery_start_offset(checkpoint: Checkpoint | None, min_physical_offset: int) -> int:
    """Where ``CommitLog.recover`` should start verifying (see the module docstring)."""
    if checkpoint is None:
        return min_physical_offset
    return max(checkpoint.flushed_physical_offset, min_physical_offset)
