"""The batch reader (``spark.read.format("raftlog")``): plans queue ranges on the driver and
reads each in a task.

Rules this module keeps:
- ``partitions()`` runs on the driver, with a client it closes before returning; ``read()``
  runs in a Python worker and opens its own client there (a channel does not pickle).
- Pushed filters only narrow the offsets read; ``pushFilters`` returns every filter, so Spark
  re-applies them all and the rows are the same with pushdown on or off.
- ``pushFilters`` lives on a subclass, handed out only with the ``pushdown`` option: Spark
  4.1+ refuses any reader that defines it while ``spark.sql.python.filterPushdown.enabled``
  is off (its default), so the plain reader must not.
- An empty read plans one empty range (Spark wants at least one partition).
- With the ``replica`` option every range is read from that member's own copy
  (range_reader.py); the plan still comes from the cluster, so every replica of an audit is
  read over the same offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from raftlog.client import Admin
from raftlog.pipeline.options import ReadOptions
from raftlog.pipeline.pushdown import Pushed, analyse, narrow_by_key, narrow_by_time
from raftlog.pipeline.queue_ranges import ClusterView, QueueRange, batch_ranges, split
from raftlog.pipeline.range_reader import read_range

LOG = logging.getLogger(__name__)


class RaftlogBatchReader(DataSourceReader):
    """Reads the ranges ``options`` name, narrowed by any pushed filters."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.pushed = Pushed()

    def partitions(self) -> Sequence[QueueRange]:
        with Admin(self.options.servers, timeout_s=self.options.timeout_s) as admin:
            view = ClusterView(admin)
            ranges, lost = batch_ranges(self.options, view)
            if lost:
                LOG.warning("failOnDataLoss=false: skipped %d offsets removed by retention", lost)
            if self.pushed.store_from_ms is not None or self.pushed.store_to_ms is not None:
                ranges = narrow_by_time(ranges, self.pushed, view)
            if self.pushed.key is not None and ranges:
                ranges = narrow_by_key(ranges, self.pushed.key, admin)
        ranges = split(ranges, self.options.min_partitions)
        return ranges or [QueueRange(self.options.topics[0], 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        if partition.size == 0:
            return iter(())
        return read_range(
            self.options.servers,
            partition,
            tags=self.pushed.tags or (),
            fail_on_data_loss=self.options.fail_on_data_loss,
            timeout_s=self.options.timeout_s,
            replica=self.options.replica,
        )


class RaftlogPushdownReader(RaftlogBatchReader):
    """The batch reader with filter pushdown (option ``pushdown`` true, Spark 4.1+ with
    ``spark.sql.python.filterPushdown.enabled``)."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        self.pushed = analyse(filters)
        return filters  # Spark re-checks every one: pushing only narrows the read
