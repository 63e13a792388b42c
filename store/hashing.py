"""Stable hashes for ConsumeQueue tag filtering and IndexFile keys (docs/store-format.md).

Rules this module keeps:
- Hashes are persisted, so they must be identical across processes and versions: zlib CRC32
  of UTF-8, never Python's ``hash()``.
- One C call per hash: dispatch computes them once per tag and key on every message.
- A unit's tag field is the tag hash for every topic but the schedule topic, where it is the
  delivery time (``unit_tag_hash``); the writer's hints and dispatch's reading of the CommitLog
  both go through that one function, so they agree.
"""

from __future__ import annotations

from collections.abc import Sequence
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


SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
"""The delay messages' topic (RocketMQ's name): its units hold a delivery time, not a tag hash."""
PROPERTY_DELIVER_MS = "TIMER_DELIVER_MS"
"""A schedule record's delivery time (ms since the epoch, decimal), stamped by the leader."""
_MAX_UNIT_TAG = 2**64 - 1


def unit_tag_hash(topic: str, tags: str, properties: Sequence[tuple[str, str]] | None) -> int:
    """What a record's ConsumeQueue unit holds in its tag field: the tag hash, except for a
    ``SCHEDULE_TOPIC`` record, whose unit holds its delivery time (``PROPERTY_DELIVER_MS``),
    so the scheduler finds due messages from the units alone, as RocketMQ's ScheduleMessage
    service does. ``properties`` is asked for only then (None: the record has none); a
    missing or malformed time counts as 0 (due at once)."""
    if topic != SCHEDULE_TOPIC:
        return tag_hash(tags)
    for name, value in properties or ():
        if name == PROPERTY_DELIVER_MS:
            return min(int(value), _MAX_UNIT_TAG) if value.isascii() and value.isdigit() else 0
    return 0
