"""Stable hashes for ConsumeQueue tag filtering and IndexFile keys (docs/store-format.md).

Rules this module keeps:
- Hashes are persisted, so they must be identical across processes and versions: zlib CRC32
  of UTF-8, never Python's ``hash()``.
- One C call per hash: dispatch computes them once per tag and key on every message.
"""

from __future__ import annotations

from zlib import crc32

KEY_SEPARATOR = "#"
"""Joins topic and key into the IndexFile key: ``topic + "#" + key``."""

_NON_NEGATIVE_31_BITS = 0x7FFFFFFF


def tag_hash(tag: str) -> int:
    """The unsigned CRC32 of the tag's UTF-8 bytes; 0 when the message has no tag."""
    return crc32(tag.encode()) if tag else 0


def key_hash(topic: str, key: str) -> int:
    """The IndexFile hash of ``topic#key``: CRC32 masked to a non-negative 31-bit int."""
    return crc32((topic + KEY_SEPARATOR + key).encode()) & _NON_NEGATIVE_31_BITS
