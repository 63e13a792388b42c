"""Test helpers: NORMAL entries whose records name the physical offsets they will occupy."""

from __future__ import annotations

from raftlog.node.raft_entry import ENTRY_HEADER_SIZE_BYTES
from raftlog.node.raft_log_storage import RaftLogStorage
from raftlog.raft.types import Entry
from raftlog.store.record import encode_record, patch_record
from tests.support import make_record


def payload_at(envelope_physical_offset: int, bodies: list[bytes], queue_offset: int = 0) -> bytes:
    """Records carrying ``bodies``, stamped for an envelope at ``envelope_physical_offset``."""
    payload = bytearray()
    for number, body in enumerate(bodies):
        record = bytearray(encode_record(make_record(body=body)))
        patch_record(
            record,
            0,
            queue_offset=queue_offset + number,
            physical_offset=envelope_physical_offset + ENTRY_HEADER_SIZE_BYTES + len(payload),
            store_timestamp_ms=1_764_000_000_000,
        )
        payload += record
    return bytes(payload)


def payload_size_bytes(bodies: list[bytes]) -> int:
    return len(payload_at(0, bodies))


def planned_entry(storage: RaftLogStorage, index: int, term: int, bodies: list[bytes]) -> Entry:
    """An entry planned at the storage's next position (as a leader plans before proposing)."""
    position = storage.plan_entry(payload_size_bytes(bodies))
    return Entry(index, term, data=payload_at(position, bodies))
