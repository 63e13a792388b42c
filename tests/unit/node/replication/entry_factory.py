"""Test helpers: NORMAL entries whose records name the physical offsets they will occupy."""

from __future__ import annotations

from raftlog.node.replication.raft_entry import ENTRY_HEADER_SIZE_BYTES, envelope_size_bytes
from raftlog.node.replication.raft_index import next_entry_position
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.raft.types import Entry, EntryType
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


class LeaderLog:
    """The test's model of a leader's log placement: the end physical offset of each entry,
    so it can build entries (with correctly stamped records) from any index, as a leader
    whose log holds them would."""

    def __init__(self, segment_size_bytes: int) -> None:
        self._segment_size_bytes = segment_size_bytes
        self._ends = {0: 0}

    def entries(self, start_index: int, term: int, specs: list[list[bytes] | bytes]) -> list[Entry]:
        """One entry per spec from ``start_index`` on (replacing later ones): a list of
        bodies is a NORMAL entry of records, bytes are a CONF_CHANGE's data."""
        end = self._ends[start_index - 1]
        for stale in [index for index in self._ends if index >= start_index]:
            del self._ends[stale]
        built: list[Entry] = []
        for index, spec in enumerate(specs, start_index):
            if isinstance(spec, bytes):
                size = envelope_size_bytes(EntryType.CONF_CHANGE, len(spec))
                position = next_entry_position(end, size, self._segment_size_bytes)
                built.append(Entry(index, term, EntryType.CONF_CHANGE, spec))
            else:
                size = envelope_size_bytes(EntryType.NORMAL, payload_size_bytes(spec))
                position = next_entry_position(end, size, self._segment_size_bytes)
                built.append(Entry(index, term, data=payload_at(position, spec)))
            end = self._ends[index] = position + size
        return built
