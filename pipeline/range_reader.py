"""Reading one queue range on an executor: Pulls with ``return_records``, each answer turned
into one Arrow RecordBatch.

Rules this module keeps:
- The client is opened here, in the task (a gRPC channel does not pickle), and closed when
  the range is read or the task stops iterating.
- Exactly the offsets ``[start, end)`` are returned, each once, in offset order: an answer's
  messages past ``end`` are dropped, and an answer short of ``end`` is followed by the next
  Pull from where it stopped.
- A leader change, an unreachable member or a member that lags (OFFSET_TOO_LARGE, or no new
  messages yet below ``end``) is retried, on any member, within the read's time bound: a pull
  is a read, safe to repeat. Only a bound that runs out is surfaced, naming the queue.
- Offsets retention removed while the read ran (OFFSET_TOO_SMALL) fail the task under
  ``failOnDataLoss`` and are skipped (counted in the log) otherwise.
- With ``replica`` (the ``replica`` option, for audits) every Pull goes to that member alone
  and sets ``this_replica``, so a master-slave slave answers from its own store instead of
  sending the reader to its master: another member's answer would be a wrong answer, not a
  fallback. A lagging replica is asked again within the bound, like any member.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from raftlog.client import (
    Connection,
    DeadlineExceededError,
    Message,
    RaftlogError,
    RetryPolicy,
    UnavailableError,
)
from raftlog.client.pulled_records import messages_from_records
from raftlog.client.record_columns import record_columns
from raftlog.pipeline.arrow_rows import columns_batch, record_batch
from raftlog.pipeline.queue_ranges import DataLossError, QueueRange
from raftlog.proto import client_pb2

LOG = logging.getLogger(__name__)
# The server caps a Pull at 1024 messages.
PULL_MAX_MESSAGES = 1024
# A member that lags the offsets the driver saw is asked again after this pause.
_LAG_PAUSE_S = 0.05
_FOUND = client_pb2.PULL_STATUS_FOUND
_NO_MATCH = client_pb2.PULL_STATUS_NO_MATCHED_MESSAGES
_TOO_SMALL = client_pb2.PULL_STATUS_OFFSET_TOO_SMALL


def _batch(response: Any, end: int) -> pa.RecordBatch | None:
    """The answer's messages below queue offset ``end`` as one RecordBatch (None if none):
    by the columnar fast path when the records allow it, through ``Message``s otherwise."""
    if not response.messages:
        columns = record_columns(response.records)
        fast = None if columns is None else columns_batch(columns, end)
        if fast is not None:
            return fast if fast.num_rows else None
        messages = messages_from_records(response.records)
    else:  # a server that predates return_records
        messages = [Message.from_proto(m) for m in response.messages]
    kept = [m for m in messages if m.queue_offset < end]
    return record_batch(kept) if kept else None


class RangeReader:
    """Reads queue ranges from the cluster at ``servers`` (``tags``: the Pull tag filter)."""

    def __init__(
        self,
        servers: str,
        *,
        tags: Sequence[str] = (),
        fail_on_data_loss: bool = True,
        timeout_s: float = 30.0,
        replica: str | None = None,
    ) -> None:
        self._connection = Connection(replica or servers)
        self._replica = replica
        self._tags = list(tags)
        self._fail_on_data_loss = fail_on_data_loss
        self._timeout_s = timeout_s
        # Each Pull is one retried read; the range as a whole also ends by its own bound.
        self._policy = RetryPolicy(
            max_attempts=50, total_timeout_s=timeout_s, attempt_timeout_s=min(10.0, timeout_s)
        )

    def _pull(self, queue_range: QueueRange, offset: int) -> Any:
        request = client_pb2.PullRequest(
            topic=queue_range.topic,
            queue_id=queue_range.queue_id,
            queue_offset=offset,
            max_messages=min(PULL_MAX_MESSAGES, queue_range.end - offset),
            tags=self._tags,
            consumer_group="spark",
            return_records=True,
            this_replica=self._replica is not None,
        )

        def attempt(timeout_s: float) -> Any:
            return self._connection.call(
                "Consumer",
                "Pull",
                request,
                timeout_s=timeout_s,
                leader_only=False,
                write=False,
                address=self._replica,
            )

        return self._policy.run(attempt, idempotent=True)

    def batches(self, queue_range: QueueRange) -> Iterator[pa.RecordBatch]:
        """The range's messages as RecordBatches (one per Pull answer that had any)."""
        offset = queue_range.start
        deadline = time.monotonic() + self._timeout_s
        lost = 0
        # Bounded: every round moves ``offset`` forward or pauses, and rounds end at the deadline.
        while offset < queue_range.end:
            try:
                response = self._pull(queue_range, offset)
            except (UnavailableError, DeadlineExceededError) as error:
                response = None
                if time.monotonic() >= deadline:
                    raise RaftlogError(
                        f"reading {_name(queue_range)} at {offset}: {error}"
                    ) from None
            if response is not None and response.status == _FOUND:
                batch = _batch(response, queue_range.end)
                if batch is not None:
                    yield batch
                deadline = time.monotonic() + self._timeout_s  # progress: a fresh bound
                offset = max(offset + 1, response.next_queue_offset)
            elif response is not None and response.status == _NO_MATCH:
                deadline = time.monotonic() + self._timeout_s
                offset = max(offset + 1, response.next_queue_offset)
            elif response is not None and response.status == _TOO_SMALL:
                offset, lost = self._skip_lost(queue_range, offset, response, lost)
            else:
                # A lagging member (or an unreachable cluster): ask again, within the bound.
                if time.monotonic() >= deadline:
                    raise RaftlogError(
                        f"reading {_name(queue_range)}: no member served offset {offset} "
                        f"within {self._timeout_s:.0f} s"
                    )
                time.sleep(_LAG_PAUSE_S)
        if lost:
            LOG.warning("%s: skipped %d offsets removed by retention", _name(queue_range), lost)

    def _skip_lost(
        self, queue_range: QueueRange, offset: int, response: Any, lost: int
    ) -> tuple[int, int]:
        first_live = int(response.next_queue_offset)
        if self._fail_on_data_loss:
            last_lost = min(first_live, queue_range.end) - 1
            raise DataLossError(
                f"data loss: {_name(queue_range)} offsets {offset}..{last_lost} were "
                "removed by retention during the read; set failOnDataLoss=false to skip them"
            )
        # Only the offsets this range asked for count: the first live one may lie past its end.
        resume = min(max(offset + 1, first_live), queue_range.end)
        return resume, lost + resume - offset

    def close(self) -> None:
        self._connection.close()


def _name(queue_range: QueueRange) -> str:
    return f"{queue_range.topic} queue {queue_range.queue_id}"


def read_range(
    servers: str,
    queue_range: QueueRange,
    *,
    tags: Sequence[str] = (),
    fail_on_data_loss: bool = True,
    timeout_s: float = 30.0,
    replica: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """``RangeReader.batches`` with its own client, closed at the end (the task's entry)."""
    reader = RangeReader(
        servers,
        tags=tags,
        fail_on_data_loss=fail_on_data_loss,
        timeout_s=timeout_s,
        replica=replica,
    )
    try:
        yield from reader.batches(queue_range)
    finally:
        reader.close()
