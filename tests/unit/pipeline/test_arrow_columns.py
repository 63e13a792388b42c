"""The source's columnar fast path (``record_columns`` + ``columns_batch``) gives exactly the
rows of the Message path (``messages_from_records`` + ``record_batch``) for the same pulled
records, and declines (None) what it does not handle: IPv6 hosts, a corrupt byte."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from raftlog.client.pulled_records import messages_from_records
from raftlog.client.record_columns import record_columns
from raftlog.pipeline.arrow_rows import columns_batch, record_batch
from raftlog.store.record import encode_record
from tests.support import make_record

PROPERTIES = [
    (("TAGS", "red"), ("UNIQ_KEY", "U-1"), ("KEYS", " k1  k2 "), ("origin", "t")),
    (),
    (("a", ""), ("TAGS", "blue"), ("TAGS", "second"), ("KEYS", "one"), ("b", "é")),
    (("KEYS", "  "), ("TAGS", ""), ("x", "y")),
]


def _records(host: str = "10.1.2.3") -> bytes:
    return b"".join(
        encode_record(
            make_record(
                topic="orders",
                queue_offset=10 + i,
                physical_offset=1000 * (i + 1),
                body=bytes([i]) * (i * 300),
                store_host=(host, 7702),
                properties=properties,
            )
        )
        for i, properties in enumerate(PROPERTIES)
    )


@pytest.mark.parametrize("end_offset", [100, 12, 10])
def test_the_fast_path_gives_the_rows_of_the_message_path(end_offset: int) -> None:
    records = _records()
    columns = record_columns(records)
    assert columns is not None
    fast = columns_batch(columns, end_offset)
    expected = record_batch(
        [m for m in messages_from_records(records) if m.queue_offset < end_offset]
    )
    assert fast is not None
    assert fast.to_pylist() == expected.to_pylist()
    assert fast.schema == expected.schema


def test_ipv6_hosts_and_corrupt_bytes_take_the_message_path() -> None:
    assert record_columns(_records("2001:db8::7")) is None
    corrupt = bytearray(_records())
    corrupt[30] ^= 1  # a physical offset byte, under the trailer CRC
    assert record_columns(bytes(corrupt)) is None
    assert record_columns(b"") is None
