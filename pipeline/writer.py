"""The sink (``df.write`` / ``df.writeStream`` ``.format("raftlog")``): rows -> idempotent
Produce batches, exactly once even when Spark retries a task.

Rules this module keeps:
- Every task writes with its own idempotent producer whose id is derived, not random:
  batch jobs ``<job id>.<partition>`` (the job id is a UUID made on the driver in
  ``writer()`` and pickled into every task, so all attempts of a task share it); streams
  ``<query id>.<batch id>.<partition>`` (Spark's query id is kept in the checkpoint and a
  restarted query re-runs an unfinished batch under the same batch id).
- Sequences start at 1 and go up by one per Produce batch, and batches are cut from the
  partition's rows by a rule of the rows alone (at most ``MAX_BATCH_ROWS`` rows /
  ``MAX_BATCH_BYTES`` bytes, a new batch when the topic changes). So an attempt that re-runs
  a task resends the same (producer id, sequence, rows) and the server answers the batches
  already stored as duplicates (or ALREADY_EXISTS, "stored once"), storing nothing twice.
  This needs the partition's rows in the same order on every attempt (docs/pipeline.md).
- Batches are sent one at a time, each waited for: an idempotent producer's batches must be
  stored in sequence order.
- The ``topic`` option, when set, wins over a ``topic`` column (as in Kafka's sink).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from raftlog.client import OutgoingMessage, Producer, SequenceForgottenError
from raftlog.client.producer import MAX_PRODUCER_ID_BYTES
from raftlog.pipeline.options import OptionError, WriteOptions

LOG = logging.getLogger(__name__)
MAX_BATCH_ROWS = 512
MAX_BATCH_BYTES = 1 << 20
_COLUMNS = ("value", "key", "tags", "properties", "topic", "queue_id")
# Spark sets these on every task of a streaming micro-batch.
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"

Row = tuple[Any, Any, Any, Any, Any, Any]  # the _COLUMNS of one row, None where absent


@dataclass
class WriteReport(WriterCommitMessage):
    """One task's outcome: rows and batches sent, batches the server already had."""

    producer_id: str
    rows: int
    batches: int
    duplicate_batches: int


def check_sink_schema(schema: StructType, options: WriteOptions) -> None:
    """The columns the sink needs are there, with types it can send (on the driver)."""
    types = {field.name: field.dataType for field in schema.fields}
    if "value" not in types:
        raise OptionError("the raftlog sink needs a 'value' column (binary or string)")
    for name in ("value", "key"):
        if name in types and not isinstance(types[name], BinaryType | StringType):
            raise OptionError(f"column {name!r} must be binary or string, not {types[name]}")
    if options.topic is None and "topic" not in types:
        raise OptionError("the raftlog sink needs option 'topic' or a 'topic' column")


def producer_id(*parts: object) -> str:
    """Parts joined by dots; hashed when over the server's 64-byte limit."""
    joined = ".".join(str(p) for p in parts)
    if len(joined.encode()) <= MAX_PRODUCER_ID_BYTES:
        return joined
    return hashlib.sha256(joined.encode()).hexdigest()[:MAX_PRODUCER_ID_BYTES]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


def _message(row: Row) -> OutgoingMessage:
    value, key, tags, properties, _, queue_id = row
    if value is None:
        raise ValueError("a row's value is null: the raftlog sink needs a value in every row")
    return OutgoingMessage(
        body=value.encode() if isinstance(value, str) else bytes(value),
        keys=(_text(key),) if key not in (None, b"", "") else (),
        tags=tags or "",
        queue_id=None if queue_id is None else int(queue_id),
        properties=list(properties.items() if isinstance(properties, dict) else properties or ()),
    )


def _chunks(rows: Iterable[Row], topic_option: str | None) -> Iterator[tuple[str, list[Row]]]:
    """(topic, rows) batches, cut by the rows alone (see the module rules)."""
    chunk: list[Row] = []
    chunk_topic = ""
    size_bytes = 0
    for row in rows:
        topic = topic_option or row[4]
        if not topic:
            raise ValueError("a row has no topic (null 'topic' column and no 'topic' option)")
        row_bytes = len(row[0] or b"") + len(row[1] or b"")
        if chunk and (
            topic != chunk_topic
            or len(chunk) >= MAX_BATCH_ROWS
            or size_bytes + row_bytes > MAX_BATCH_BYTES
        ):
            yield chunk_topic, chunk
            chunk, size_bytes = [], 0
        chunk_topic = topic
        chunk.append(row)
        size_bytes += row_bytes
    if chunk:
        yield chunk_topic, chunk


def send_rows(options: WriteOptions, the_producer_id: str, rows: Iterable[Row]) -> WriteReport:
    """Send ``rows`` as numbered batches of one idempotent producer (sequences from 1)."""
    report = WriteReport(the_producer_id, 0, 0, 0)
    with Producer(
        options.servers, producer_id=the_producer_id, first_sequence=1, timeout_s=options.timeout_s
    ) as producer:
        for topic, chunk in _chunks(rows, options.topic):
            try:
                results = producer.send_batch(topic, [_message(row) for row in chunk])
                duplicate = bool(results and results[0].duplicate)
            except SequenceForgottenError:
                duplicate = True  # ALREADY_EXISTS: stored once before, its result forgotten
            report.rows += len(chunk)
            report.batches += 1
            report.duplicate_batches += int(duplicate)
            _maybe_fail_on_purpose(options, report.rows)
    return report


def _maybe_fail_on_purpose(options: WriteOptions, rows_stored: int) -> None:
    """The test hook ``failFirstAttemptAfterRows``: fail a first attempt after it wrote."""
    limit = options.fail_first_attempt_after_rows
    if limit is not None and rows_stored >= limit and _task().attemptNumber() == 0:
        raise RuntimeError(
            f"failFirstAttemptAfterRows: failing this first attempt on purpose after "
            f"{rows_stored} stored rows (Spark retries it; the retry must store none twice)"
        )


def arrow_rows(batches: Iterable[Any], names: Sequence[str]) -> Iterator[Row]:
    """The sink's columns of each Arrow batch, row by row (None for a missing column)."""
    for batch in batches:
        columns = [
            batch.column(names.index(c)).to_pylist() if c in names else [None] * batch.num_rows
            for c in _COLUMNS
        ]
        yield from zip(*columns, strict=True)


def _log_commit(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    done = [m for m in messages if isinstance(m, WriteReport)]
    LOG.info(
        "%s: %d rows in %d batches (%d already stored, resent by a retried task)",
        what,
        sum(m.rows for m in done),
        sum(m.batches for m in done),
        sum(m.duplicate_batches for m in done),
    )


class RaftlogWriter(DataSourceArrowWriter):
    """A batch write (``df.write.format("raftlog").mode("append")``)."""

    def __init__(self, options: WriteOptions, names: Sequence[str], job_id: str) -> None:
        self.options = options
        self.names = list(names)
        self.job_id = job_id

    def write(self, iterator: Iterator[Any]) -> WriteReport:
        partition = _task().partitionId()
        rows = arrow_rows(iterator, self.names)
        return send_rows(self.options, producer_id(self.job_id, partition), rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, f"raftlog write {self.job_id}")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, f"raftlog write {self.job_id} aborted after")


def _stream_base() -> type:
    """Spark 4.1+ hands a stream writer Arrow batches; 4.0 hands it Rows."""
    try:
        from pyspark.sql.datasource import DataSourceStreamArrowWriter
    except ImportError:
        return DataSourceStreamWriter
    return DataSourceStreamArrowWriter


class RaftlogStreamWriter(_stream_base()):  # type: ignore[misc]
    """A streaming write (``df.writeStream.format("raftlog")``)."""

    def __init__(self, options: WriteOptions, names: Sequence[str]) -> None:
        self.options = options
        self.names = list(names)
        # Used only if Spark did not say which query this is (it always does since 3.x).
        self.fallback_query_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> WriteReport:
        context = _task()
        query_id = context.getLocalProperty(_QUERY_ID_PROPERTY) or self.fallback_query_id
        batch_id = context.getLocalProperty(_BATCH_ID_PROPERTY) or "0"
        the_producer_id = producer_id(query_id, batch_id, context.partitionId())
        first = next(iterator, None)
        if first is None:
            return WriteReport(the_producer_id, 0, 0, 0)
        rest = _rejoin(first, iterator)
        if hasattr(first, "num_rows"):
            rows: Iterator[Row] = arrow_rows(rest, self.names)
        else:  # Spark 4.0: Rows
            rows = (tuple(getattr(r, c, None) for c in _COLUMNS) for r in rest)  # type: ignore[misc]
        return send_rows(self.options, the_producer_id, rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"raftlog stream batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"raftlog stream batch {batchId} aborted after")


def _task() -> TaskContext:
    """The running task's context (write() runs only inside a Spark task)."""
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the raftlog sink's write() runs only inside a Spark task")
    return context


def _rejoin(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
