"""Check or rewrite tests/data/vectors.json, the store format's byte-exact examples.

``--check`` (the default) recomputes every vector with the store's own codecs and walks the
record's bytes field by field with the widths in docs/store-format.md's record table, so a
drift of the codecs, of the file or of the spec is reported; it exits non-zero on any problem.
``--write`` rewrites the file from the codecs, for a deliberate format change (``make vectors``).

Rules it keeps: the vectors' *fields* are the source of truth, every derived value (hex, sizes,
CRCs, hashes, ids) is recomputed; the spec table is parsed, not restated here, so the doc and
the bytes cannot disagree silently.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import zlib
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as a script: ``python tests/data/make_vectors.py``
    sys.path.insert(0, str(REPO_ROOT))

from raftlog.store.consume_queue import encode_unit  # noqa: E402
from raftlog.store.hashing import key_hash, tag_hash  # noqa: E402
from raftlog.store.message_id import encode_message_id  # noqa: E402
from raftlog.store.record import (  # noqa: E402
    MessageRecord,
    encode_blank,
    encode_properties,
    encode_record,
    pack_address,
)

VECTORS_PATH = Path(__file__).resolve().with_name("vectors.json")
SPEC_PATH = REPO_ROOT / "docs" / "store-format.md"

# A row of the record table: | 6 | queue_offset | 8 | meaning |
_TABLE_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([a-z_+ ]+?)\s*\|\s*([^|]+?)\s*\|(.*)\|\s*$")
_FIXED_WIDTH = re.compile(r"^(\d+)")
_LENGTH_PREFIXED = re.compile(r"^(\d+)\s*\+\s*n$")
_MAGIC = re.compile(r"`0x([0-9a-fA-F]{8})`")


def record_from_fields(fields: dict[str, Any]) -> MessageRecord:
    """The MessageRecord the vector's JSON fields describe."""
    values = dict(fields)
    values["born_host"] = tuple(values["born_host"])
    values["store_host"] = tuple(values["store_host"])
    values["body"] = values["body"].encode()
    values["properties"] = tuple(tuple(pair) for pair in values["properties"])
    return MessageRecord(**values)


def regenerate(vectors: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``vectors`` with every derived value recomputed from its fields."""
    out = copy.deepcopy(vectors)
    message = out["message_record"]
    record = record_from_fields(message["fields"])
    encoded = encode_record(record, record_crc=False)
    message["hex"] = encoded.hex()
    message["total_size"] = len(encoded)
    message["body_crc32"] = zlib.crc32(record.body)
    blank = out["end_of_segment_blank"]
    blank["hex"] = encode_blank(blank["remaining_bytes"]).hex()
    unit = out["consume_queue_unit"]
    unit["hex"] = encode_unit(unit["commitlog_offset"], unit["size"], unit["tag_hash"]).hex()
    message_id = out["offset_message_id"]
    message_id["id"] = encode_message_id(
        tuple(message_id["store_host"]), message_id["physical_offset"]
    )
    hashes = out["hashes"]
    hashes["tag_hash"] = {tag: tag_hash(tag) for tag in hashes["tag_hash"]}
    hashes["key_hash"] = {joined: key_hash(*joined.split("#", 1)) for joined in hashes["key_hash"]}
    return out


def _spec_rows(spec_text: str) -> list[tuple[str, str, str]]:
    """(field, bytes, meaning) for each row of the record table, in order."""
    rows: list[tuple[str, str, str]] = []
    for line in spec_text.splitlines():
        match = _TABLE_ROW.match(line.strip())
        if match:
            rows.append((match.group(2).strip(), match.group(3).strip(), match.group(4).strip()))
    return rows


def _expected_field_bytes(field: str, meaning: str, message: dict[str, Any]) -> bytes | None:
    """What the record table's ``field`` should hold for the vector, or None if unknown."""
    fields = message["fields"]
    record = record_from_fields(fields)
    ints: dict[str, int] = {
        "total_size": message["total_size"],
        "body_crc": message["body_crc32"],
        "queue_id": record.queue_id,
        "flag": record.flag,
        "queue_offset": record.queue_offset,
        "physical_offset": record.physical_offset,
        "sys_flag": record.sys_flag,
        "born_timestamp": record.born_timestamp_ms,
        "store_timestamp": record.store_timestamp_ms,
        "reconsume_times": record.reconsume_times,
        "prepared_transaction_offset": record.prepared_transaction_offset,
    }
    if field in ints:
        return ints[field].to_bytes(32, "big")  # trimmed to the table's width by the caller
    if field == "magic":
        magic = _MAGIC.search(meaning)
        return bytes.fromhex(magic.group(1)) if magic else None
    hosts = {"born_host": record.born_host, "store_host": record.store_host}
    if field in hosts:
        address, port = hosts[field]
        return pack_address(address) + port.to_bytes(4, "big")
    variable = {
        "body_length + body": record.body,
        "topic_length + topic": record.topic.encode(),
        "properties_length + properties": encode_properties(record.properties),
    }
    return variable.get(field)


def _field_width(width_text: str, field: str, expected: bytes) -> tuple[int, bool] | None:
    """(length-prefix or fixed width in bytes, whether the field is length-prefixed)."""
    prefixed = _LENGTH_PREFIXED.match(width_text)
    if prefixed:
        return int(prefixed.group(1)), True
    fixed = _FIXED_WIDTH.match(width_text)
    if not fixed:
        return None
    if field.endswith("_host"):  # "8 (20 IPv6)": the vector's hosts decide which applies
        return len(expected), False
    return int(fixed.group(1)), False


def spec_mismatches(spec_text: str, vectors: dict[str, Any]) -> list[str]:
    """Walk the record vector's bytes with the spec table's widths; one line per disagreement."""
    message = vectors["message_record"]
    data = bytes.fromhex(message["hex"])
    rows = _spec_rows(spec_text)
    if len(rows) != 17:
        return [f"docs/store-format.md: the record table has {len(rows)} rows, not 17"]
    problems: list[str] = []
    pos = 0
    for field, width_text, meaning in rows:
        expected = _expected_field_bytes(field, meaning, message)
        if expected is None:
            problems.append(f"{field}: the table names a field this check does not know")
            continue
        width = _field_width(width_text, field, expected)
        if width is None:
            problems.append(f"{field}: width {width_text!r} is not a byte count")
            continue
        size_bytes, prefixed = width
        if prefixed:
            length = int.from_bytes(data[pos : pos + size_bytes], "big")
            actual = data[pos + size_bytes : pos + size_bytes + length]
            pos += size_bytes + length
            if length != len(expected):
                problems.append(f"{field}: length prefix says {length}, expected {len(expected)}")
        else:
            actual = data[pos : pos + size_bytes]
            pos += size_bytes
            expected = expected[-size_bytes:]
        if actual != expected:
            problems.append(f"{field}: bytes {actual.hex()} but the fields give {expected.hex()}")
    if pos != len(data):
        problems.append(f"the table's fields cover {pos} bytes; the record has {len(data)}")
    return problems


def check(vectors_path: Path = VECTORS_PATH, spec_path: Path = SPEC_PATH) -> list[str]:
    """Every way the committed vectors disagree with the codecs or with the spec."""
    vectors = json.loads(vectors_path.read_text())
    regenerated = regenerate(vectors)
    problems = [
        f"{name}: the file says {vectors[name]!r}, the codecs give {regenerated[name]!r}"
        for name in regenerated
        if regenerated[name] != vectors[name]
    ]
    return problems + spec_mismatches(spec_path.read_text(), vectors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report drift (the default)")
    mode.add_argument("--write", action="store_true", help="rewrite vectors.json from the codecs")
    args = parser.parse_args(argv)
    if args.write:
        vectors = regenerate(json.loads(VECTORS_PATH.read_text()))
        VECTORS_PATH.write_text(json.dumps(vectors, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {VECTORS_PATH.relative_to(REPO_ROOT)}")
    problems = check()
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print("vectors match the codecs and docs/store-format.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
