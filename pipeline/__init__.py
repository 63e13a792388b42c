"""raftlog.pipeline: a PySpark source and sink for raftlog topics (docs/pipeline.md).

``spark.dataSource.register(RaftlogDataSource)`` makes ``format("raftlog")`` available to
``spark.read``, ``spark.readStream``, ``df.write`` and ``df.writeStream``. This package uses
the cluster only through raftlog.client (import-linter contract); it needs the ``pipeline``
extra (``pyspark[sql]``).
"""

from raftlog.pipeline.options import OptionError
from raftlog.pipeline.queue_ranges import DataLossError
from raftlog.pipeline.source import RaftlogDataSource

__all__ = ["DataLossError", "OptionError", "RaftlogDataSource"]
