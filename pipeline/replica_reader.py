"""Reading one queue range from ONE member's own copy (the ``replica`` option), for replica
audits.

Rules this module keeps:
- Every Pull goes to that member alone (``address`` pins the call; no other member is tried,
  no redirect is followed) and sets ``this_replica``, so a master-slave slave answers from its
  own store instead of sending the reader to its master. Another member's answer would be a
  wrong answer, not a fallback.
- Everything else (offsets exactly ``[start, end)``, a lagging member asked again within the
  read's time bound, data loss) is RangeReader's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from raftlog.pipeline.queue_ranges import QueueRange
from raftlog.pipeline.range_reader import PULL_MAX_MESSAGES, RangeReader
from raftlog.proto import client_pb2


class ReplicaRangeReader(RangeReader):
    """A RangeReader whose Pulls read ``replica``'s own copy and nobody else's."""

    def __init__(self, replica: str, *, fail_on_data_loss: bool, timeout_s: float) -> None:
        super().__init__(replica, fail_on_data_loss=fail_on_data_loss, timeout_s=timeout_s)
        self._replica = replica

    def _pull(self, queue_range: QueueRange, offset: int) -> Any:
        request = client_pb2.PullRequest(
            topic=queue_range.topic,
            queue_id=queue_range.queue_id,
            queue_offset=offset,
            max_messages=min(PULL_MAX_MESSAGES, queue_range.end - offset),
            consumer_group="spark-audit",
            return_records=True,
            this_replica=True,
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


def read_replica_range(
    replica: str, queue_range: QueueRange, *, fail_on_data_loss: bool, timeout_s: float
) -> Iterator[pa.RecordBatch]:
    """The range as ``replica`` holds it, with its own client, closed at the end."""
    reader = ReplicaRangeReader(replica, fail_on_data_loss=fail_on_data_loss, timeout_s=timeout_s)
    try:
        yield from reader.batches(queue_range)
    finally:
        reader.close()
