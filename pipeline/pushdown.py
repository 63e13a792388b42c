"""Filter pushdown for batch reads (Spark 4.1+, ``spark.sql.python.filterPushdown.enabled``):
which filters narrow what is pulled, and how.

Rules this module keeps:
- Pushed filters only narrow the read; Spark re-applies every filter (the reader returns
  them all from ``pushFilters``), so a narrowing may be a superset but never drops a row.
- ``tags = 'x'`` / ``tags IN (...)``: the Pull's tag filter (tag hash in the ConsumeQueue,
  re-checked on the server).
- ``store_timestamp`` bounds (>, >=, <, <=, =): the ConsumeQueue time search narrows each
  range's offsets. The born ``timestamp`` is the producer's clock, not ordered in a queue, so
  it is never used to narrow.
- ``key = b'...'`` (one key without spaces): the IndexFile (QueryByKey on the leader) gives the
  offsets; when its answer is full (the server's cap) it may be incomplete, so the read is not
  narrowed by key at all.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from raftlog.client import Admin
from raftlog.pipeline.queue_ranges import ClusterView, QueueRange
from raftlog.proto import client_pb2

# QueryByKey's server cap (ServiceLimits.max_query_messages): a full answer may be partial.
MAX_KEY_MESSAGES = 1024


@dataclass(frozen=True, slots=True)
class Pushed:
    """What the filters allow the reader to narrow (None: not narrowed)."""

    tags: tuple[str, ...] | None = None
    key: str | None = None
    store_from_ms: int | None = None  # inclusive
    store_to_ms: int | None = None  # inclusive


def _ms(value: Any) -> int | None:
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:  # Spark hands naive datetimes in the session's local time zone
        value = value.astimezone()
    return int(value.timestamp() * 1000)


def _key_text(value: Any) -> str | None:
    if isinstance(value, bytes | bytearray):
        try:
            text = bytes(value).decode()
        except UnicodeDecodeError:
            return None
        return text if text and " " not in text else None
    return None


def _tighter(current: int | None, bound: int, pick: Any) -> int:
    return bound if current is None else int(pick(current, bound))


def _push_time(pushed: Pushed, item: Any) -> Pushed:
    millis = _ms(getattr(item, "value", None))
    if millis is None:
        return pushed
    if isinstance(item, GreaterThan | GreaterThanOrEqual | EqualTo):
        pushed = replace(pushed, store_from_ms=_tighter(pushed.store_from_ms, millis, max))
    if isinstance(item, LessThan | LessThanOrEqual | EqualTo):
        pushed = replace(pushed, store_to_ms=_tighter(pushed.store_to_ms, millis, min))
    return pushed


def analyse(filters: Iterable[Any]) -> Pushed:
    """The narrowing the ANDed ``filters`` allow."""
    pushed = Pushed()
    for item in filters:
        column = getattr(item, "attribute", ())
        if column == ("tags",) and isinstance(item, EqualTo) and isinstance(item.value, str):
            pushed = replace(pushed, tags=(item.value,))
        elif column == ("tags",) and isinstance(item, In):
            values = tuple(v for v in item.value if isinstance(v, str))
            if len(values) == len(item.value) and values:
                pushed = replace(pushed, tags=values)
        elif column == ("key",) and isinstance(item, EqualTo):
            pushed = replace(pushed, key=_key_text(item.value))
        elif column == ("store_timestamp",):
            pushed = _push_time(pushed, item)
    return pushed


def narrow_by_time(
    ranges: Sequence[QueueRange], pushed: Pushed, view: ClusterView
) -> list[QueueRange]:
    """Each range cut to the offsets stored within the pushed store-time bounds."""
    narrowed: list[QueueRange] = []
    for r in ranges:
        start, end = r.start, r.end
        if pushed.store_from_ms is not None:
            start = max(start, view.offset_at(r.topic, r.queue_id, pushed.store_from_ms))
        if pushed.store_to_ms is not None:
            # The first offset stored after the bound's millisecond ends the range.
            end = min(end, view.offset_at(r.topic, r.queue_id, pushed.store_to_ms + 1))
        if start < end:
            narrowed.append(QueueRange(r.topic, r.queue_id, start, end))
    return narrowed


def narrow_by_key(ranges: Sequence[QueueRange], key: str, admin: Admin) -> list[QueueRange]:
    """One-offset ranges of the messages the IndexFile names for ``key`` (or ``ranges``
    unchanged when the index's answer may be incomplete)."""
    found: set[tuple[str, int, int]] = set()
    for topic in sorted({r.topic for r in ranges}):
        request = client_pb2.QueryByKeyRequest(topic=topic, key=key, max_messages=MAX_KEY_MESSAGES)
        # The leader: its index has every committed message a follower may not have yet.
        response = admin.connection.call(
            "Consumer",
            "QueryByKey",
            request,
            timeout_s=admin.timeout_s,
            leader_only=True,
            write=False,
        )
        if len(response.messages) >= MAX_KEY_MESSAGES:
            return list(ranges)
        found.update((m.topic, m.queue_id, m.queue_offset) for m in response.messages)
    return [
        QueueRange(topic, queue_id, offset, offset + 1)
        for topic, queue_id, offset in sorted(found)
        if any(
            r.topic == topic and r.queue_id == queue_id and r.start <= offset < r.end
            for r in ranges
        )
    ]
