"""The durable Raft hard state (term, vote, commit) in one small file, and the CRC-framed
whole-file format it (and the log's snapshot point) are written in.

Durability: the file is replaced whole with the store's ``write_atomically`` (write a temporary
sibling, fsync it, rename it over the target, fsync the directory). A crash leaves the old
content or the new one, never a mix, so no second slot is needed. Chosen over a two-slot file
because a two-slot file cannot tell a torn newest slot (safe to fall back from: never
acknowledged) from a rotted one (unsafe: the vote in it may have been acted on); with one
atomically replaced file, any damage is simply an error.

Rules this module keeps:
- ``load`` returns ``HardState()`` when the file does not exist (a fresh node), and raises
  ``CorruptStateFileError`` when it exists but its frame, CRC or fields are wrong: a node must
  never silently forget a vote or a term.
- Frame: ``magic(4) | crc32(4) | length(4) | body``, big-endian; the CRC covers the length and
  the body. Hard state body: ``term(8) | commit(8) | vote_length(2) | vote (UTF-8)``.
- All I/O through the store's FileSystem.
"""

from __future__ import annotations

import os
import struct
import zlib

from raftlog.raft.types import HardState
from raftlog.store.atomic_file import read_file, write_atomically
from raftlog.store.filesystem import FileSystem

_FRAME = struct.Struct(">III")
_HARD_STATE = struct.Struct(">qqH")
HARD_STATE_MAGIC = 0x48525354  # "HRST"
HARD_STATE_FILE_NAME = "hard_state"
MAX_VOTE_BYTES = 0xFFFF


class CorruptStateFileError(Exception):
    """A Raft state file exists but cannot be trusted; the node must not start on guesses."""


def write_checked_file(fs: FileSystem, path: str, magic: int, body: bytes) -> None:
    """Replace ``path`` durably and atomically by ``body`` framed with ``magic`` and a CRC."""
    length = struct.pack(">I", len(body))
    crc = zlib.crc32(body, zlib.crc32(length))
    write_atomically(fs, path, _FRAME.pack(magic, crc, len(body)) + body)


def read_checked_file(fs: FileSystem, path: str, magic: int) -> bytes | None:
    """The body of a file ``write_checked_file`` wrote, or None when it does not exist;
    CorruptStateFileError when it exists but is damaged."""
    data = read_file(fs, path)
    if data is None:
        return None
    if len(data) < _FRAME.size:
        raise CorruptStateFileError(f"{path}: {len(data)} bytes, too short for its frame")
    found_magic, crc, length = _FRAME.unpack_from(data, 0)
    body = data[_FRAME.size :]
    if found_magic != magic or length != len(body):
        raise CorruptStateFileError(
            f"{path}: magic {found_magic:#010x} length {length} with {len(body)} body bytes"
        )
    if zlib.crc32(body, zlib.crc32(data[8:12])) != crc:
        raise CorruptStateFileError(f"{path}: CRC mismatch")
    return body


class HardStateFile:
    """``<directory>/hard_state``. ``save`` is durable when it returns."""

    def __init__(self, fs: FileSystem, directory: str) -> None:
        self._fs = fs
        self._path = os.path.join(directory, HARD_STATE_FILE_NAME)
        fs.makedirs(directory)

    def load(self) -> HardState:
        body = read_checked_file(self._fs, self._path, HARD_STATE_MAGIC)
        if body is None:
            return HardState()
        if len(body) < _HARD_STATE.size:
            raise CorruptStateFileError(f"{self._path}: body of {len(body)} bytes")
        term, commit, vote_length = _HARD_STATE.unpack_from(body, 0)
        vote_bytes = body[_HARD_STATE.size :]
        if len(vote_bytes) != vote_length or term < 0 or commit < 0:
            raise CorruptStateFileError(
                f"{self._path}: term {term}, commit {commit}, vote of {vote_length} bytes "
                f"({len(vote_bytes)} present)"
            )
        try:
            vote = vote_bytes.decode("utf-8") if vote_length else None
        except UnicodeDecodeError as error:
            raise CorruptStateFileError(f"{self._path}: vote is not UTF-8") from error
        return HardState(term=term, vote=vote, commit=commit)

    def save(self, hard_state: HardState) -> None:
        vote = (hard_state.vote or "").encode("utf-8")
        if len(vote) > MAX_VOTE_BYTES or (hard_state.vote is not None and not vote):
            raise ValueError(f"vote {hard_state.vote!r} cannot be stored")
        body = _HARD_STATE.pack(hard_state.term, hard_state.commit, len(vote)) + vote
        write_checked_file(self._fs, self._path, HARD_STATE_MAGIC, body)
