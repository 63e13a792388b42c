"""The ``raftlog`` data source: Spark's entry point, which hands out the readers and writers.

Rules this module keeps: options are parsed here, on the driver, so a bad one fails the
query before any task starts, with a message naming it (``OptionError``); the objects handed
out hold only parsed options (plain data), never a client, so they pickle to the workers.
Register it with ``spark.dataSource.register(RaftlogDataSource)``.
"""

from __future__ import annotations

import uuid

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from raftlog.pipeline.batch_reader import RaftlogBatchReader, RaftlogPushdownReader
from raftlog.pipeline.options import OptionError, read_options, write_options
from raftlog.pipeline.schema import SPARK_SCHEMA
from raftlog.pipeline.stream_reader import RaftlogStreamReader
from raftlog.pipeline.writer import RaftlogStreamWriter, RaftlogWriter, check_sink_schema


def _append_only(overwrite: bool) -> None:
    if overwrite:
        raise OptionError("the raftlog sink only appends: use .mode('append')")


class RaftlogDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("raftlog")`` (docs/pipeline.md)."""

    @classmethod
    def name(cls) -> str:
        return "raftlog"

    def schema(self) -> StructType:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        parsed = read_options(self.options, streaming=False)
        return RaftlogPushdownReader(parsed) if parsed.pushdown else RaftlogBatchReader(parsed)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RaftlogStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _append_only(overwrite)
        parsed = write_options(self.options)
        check_sink_schema(schema, parsed)
        # Made once on the driver and pickled into every task: a retried task of this job
        # gets the same id (so its resends are recognised); another job gets another one,
        # unless the ``jobId`` option names it (a deliberate re-run of the same input).
        job_id = parsed.job_id or uuid.uuid4().hex
        return RaftlogWriter(parsed, schema.fieldNames(), job_id=job_id)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _append_only(overwrite)
        parsed = write_options(self.options)
        check_sink_schema(schema, parsed)
        return RaftlogStreamWriter(parsed, schema.fieldNames())
