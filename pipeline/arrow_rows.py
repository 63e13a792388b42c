"""Pulled messages -> one Arrow RecordBatch of the source schema, column by column.

Rules this module keeps: each column is built in one pass over the messages (a list
comprehension per column, then one ``pa.array`` call), never a Python row object per
message; timestamps go from milliseconds to ``timestamp[us, UTC]`` with one vectorised
multiply; ``key`` is the message's KEYS joined by spaces, as stored (null when it has none),
and ``tags`` is null when the message has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import pyarrow as pa
import pyarrow.compute as pc

from raftlog.client import Message
from raftlog.pipeline.schema import ARROW_SCHEMA, PROPERTIES_TYPE, TIMESTAMP_TYPE

_MICROS_PER_MS = 1000


def _timestamps(milliseconds: list[int]) -> pa.Array:
    as_ms = pa.array(milliseconds, pa.int64())
    return pc.multiply(as_ms, _MICROS_PER_MS).cast(TIMESTAMP_TYPE)


def _properties(messages: Sequence[Message]) -> pa.Array:
    """A map column from the messages' property pairs: offsets, then flat keys and values."""
    offsets = [0]
    total = 0
    for message in messages:
        total += len(message.properties)
        offsets.append(total)
    pairs = list(chain.from_iterable(m.properties for m in messages))
    names = pa.array([p[0] for p in pairs], pa.string())
    values = pa.array([p[1] for p in pairs], pa.string())
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), names, values, PROPERTIES_TYPE)


def record_batch(messages: Sequence[Message]) -> pa.RecordBatch:
    """The messages as one RecordBatch of ``ARROW_SCHEMA`` (column order included)."""
    columns = [
        pa.array([" ".join(m.keys).encode() if m.keys else None for m in messages], pa.binary()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([m.topic for m in messages], pa.string()),
        pa.array([m.queue_id for m in messages], pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        _timestamps([m.born_timestamp_ms for m in messages]),
        pa.array([m.tags or None for m in messages], pa.string()),
        _properties(messages),
        pa.array([m.msg_id for m in messages], pa.string()),
        _timestamps([m.store_timestamp_ms for m in messages]),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
