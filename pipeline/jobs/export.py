"""The ``export`` job: one topic -> Parquet, partitioned by ``date`` (the UTC day of the
store timestamp) and ``queue_id``.

Run it as ``raftlog pipeline export --servers ... --topic t --output out/`` or as
``spark-submit pipeline/jobs/export.py --servers ... --topic t --output out/``.
Rules this module keeps: the offsets are pinned on the driver before the read (runner.Plan),
so the export is of one consistent range whatever arrives meanwhile; the day comes from the
store timestamp in UTC, whatever the session's time zone; the columns are the source's, with
``date`` and ``queue_id`` as the Hive-style directories ``date=YYYY-MM-DD/queue_id=N``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from raftlog.pipeline.jobs.progress_bar import ProgressBar
from raftlog.pipeline.jobs.runner import (
    EXIT_OK,
    add_common_arguments,
    add_offset_arguments,
    check_offsets,
    plan_offsets,
    run_job,
)

PARTITION_COLUMNS = ("date", "queue_id")
_MICROS_PER_DAY = 86_400_000_000


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raftlog pipeline export",
        description="Export one topic to Parquet, partitioned by date (UTC day of the store "
        "timestamp) and queue_id. The offset range is fixed when the job starts.",
    )
    add_common_arguments(parser)
    parser.add_argument("--topic", required=True, help="the topic to export")
    parser.add_argument("--output", required=True, help="the Parquet directory to write")
    add_offset_arguments(parser)
    parser.add_argument(
        "--mode",
        choices=("errorifexists", "overwrite", "append"),
        default="errorifexists",
        help="what to do when --output exists (default errorifexists)",
    )
    parser.add_argument(
        "--min-partitions",
        type=int,
        default=None,
        help="at least this many read tasks (default: twice Spark's default parallelism)",
    )
    return parser


def with_partition_columns(df: Any) -> Any:
    """The source's rows plus ``date``: the UTC day of ``store_timestamp``."""
    from pyspark.sql import functions as F

    day = F.floor(F.unix_micros("store_timestamp") / _MICROS_PER_DAY).cast("int")
    return df.withColumn("date", F.date_from_unix_date(day))


def run(spark: Any, args: argparse.Namespace) -> int:
    """Export ``args.topic`` to ``args.output``; prints what it wrote."""
    plan = plan_offsets(args)
    min_partitions = args.min_partitions or 2 * spark.sparkContext.defaultParallelism
    df = (
        spark.read.format("raftlog")
        .options(**plan.source_options(args.servers, args.timeout_ms))
        .option("minPartitions", str(min_partitions))
        .load()
    )
    started = time.monotonic()
    with ProgressBar(spark, f"export {plan.topic}", plan.total_offsets, "offsets"):
        with_partition_columns(df).write.partitionBy(*PARTITION_COLUMNS).mode(args.mode).parquet(
            args.output
        )
    queues = ", ".join(f"{r.queue_id}:[{r.start},{r.end})" for r in plan.ranges) or "none"
    print(
        f"exported {plan.total_offsets} records of {plan.topic} (queues {queues}) to "
        f"{args.output} in {time.monotonic() - started:.1f} s"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_job("export", build_parser(), run, argv, check=check_offsets)


if __name__ == "__main__":
    sys.exit(main())
