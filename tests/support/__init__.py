"""Shared test helpers: record factories, a Hypothesis strategy for records, the spec vectors,
a toy CRC envelope with a block builder, and the simulated file system (sim_filesystem.py)."""

from __future__ import annotations

import ipaddress
import json
import struct
import zlib
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from raftlog.store.commit_log import Envelope
from raftlog.store.record import MessageRecord, patch_record

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_PATH = REPO_ROOT / "tests" / "data" / "vectors.json"


def load_vectors() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(VECTORS_PATH.read_text())
    return loaded


def make_record(**overrides: Any) -> MessageRecord:
    fields: dict[str, Any] = {
        "topic": "orders",
        "queue_id": 1,
        "flag": 0,
        "queue_offset": 0,
        "physical_offset": 0,
        "sys_flag": 0,
        "born_timestamp_ms": 1_764_000_000_000,
        "born_host": ("127.0.0.1", 54321),
        "store_timestamp_ms": 1_764_000_000_123,
        "store_host": ("127.0.0.1", 10911),
        "reconsume_times": 0,
        "prepared_transaction_offset": 0,
        "body": b"hello raftlog",
        "properties": (("KEYS", "k1 k2"), ("TAGS", "tagA")),
    }
    fields.update(overrides)
    return MessageRecord(**fields)


_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_hosts = st.tuples(
    st.one_of(
        st.integers(0, 2**32 - 1).map(lambda n: str(ipaddress.IPv4Address(n))),
        st.integers(0, 2**128 - 1).map(lambda n: str(ipaddress.IPv6Address(n))),
    ),
    _INT32,
)
# Keys/values exclude the separators \x01 and \x02 (validation refuses them) and surrogates
# (not encodable as UTF-8).
_property_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=20
)


@st.composite
def records(draw: st.DrawFn) -> MessageRecord:
    topic = draw(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60))
    return MessageRecord(
        topic=topic,
        queue_id=draw(_INT32),
        flag=draw(_INT32),
        queue_offset=draw(_INT64),
        physical_offset=draw(_INT64),
        # The host bits are derived from the hosts; the others are free.
        sys_flag=draw(_INT32),
        born_timestamp_ms=draw(_INT64),
        born_host=draw(_hosts),
        store_timestamp_ms=draw(_INT64),
        store_host=draw(_hosts),
        reconsume_times=draw(_INT32),
        prepared_transaction_offset=draw(_INT64),
        body=draw(st.binary(max_size=300)),
        properties=tuple(
            draw(
                st.lists(
                    st.tuples(_property_text.filter(lambda key: key != "__CRC32#"), _property_text),
                    max_size=5,
                )
            )
        ),
    )


# A toy envelope for tests: total_size(4) | magic(4) | crc32 of the payload(4) | records.
CRC_ENVELOPE_MAGIC = 0x5AFE0001
CRC_ENVELOPE_HEADER = struct.Struct(">iII")


def crc_envelope_ok(item: memoryview) -> bool:
    crc: int = CRC_ENVELOPE_HEADER.unpack_from(item, 0)[2]
    return zlib.crc32(item[CRC_ENVELOPE_HEADER.size :]) == crc


CRC_ENVELOPE = Envelope(CRC_ENVELOPE_MAGIC, CRC_ENVELOPE_HEADER.size, crc_envelope_ok)


def stamp_block(
    start: int,
    records: list[bytearray],
    *,
    in_envelope: bool = False,
    first_queue_offset: int = 0,
    store_timestamp_ms: int = 1000,
) -> tuple[bytes, list[int]]:
    """The block to append at ``start``: the records stamped with their real physical
    offsets (and consecutive queue offsets), optionally wrapped in a CRC_ENVELOPE; returns
    the block and each record's physical offset."""
    header_bytes = CRC_ENVELOPE_HEADER.size if in_envelope else 0
    payload = bytearray()
    positions: list[int] = []
    for index, record in enumerate(records):
        position = start + header_bytes + len(payload)
        patch_record(
            record,
            0,
            queue_offset=first_queue_offset + index,
            physical_offset=position,
            store_timestamp_ms=store_timestamp_ms,
        )
        payload += record
        positions.append(position)
    if not in_envelope:
        return bytes(payload), positions
    header = CRC_ENVELOPE_HEADER.pack(
        header_bytes + len(payload), CRC_ENVELOPE_MAGIC, zlib.crc32(payload)
    )
    return header + payload, positions
