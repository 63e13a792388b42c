"""The ``import`` job: Parquet or CSV files -> a topic, through the exactly-once sink.

Run it as ``raftlog pipeline import --servers ... --topic t --input data.csv`` or as
``spark-submit pipeline/jobs/importer.py ...`` (``import`` is a Python keyword, hence the
module's name). Columns: ``value`` (required), ``key``, ``tags``, ``properties`` (a map, or in
CSV a JSON object string) are sent; other columns are ignored.

Rules this module keeps:
- Spark's task retries store nothing twice (the sink's producer ids and sequences). A whole
  re-run is another job: without ``--job-id`` it gets a fresh id and writes every row again.
  With the same ``--job-id`` and the same input files, it re-sends under the same producer
  ids and sequences, so the server stores nothing twice. That needs each task to see the
  same rows in the same order, so the file splits are pinned here (``PINNED_SPLITS``)
  instead of following the master's core count. A changed input needs a new job id: rows
  re-sent under sequences already stored are dropped as duplicates.
- The input is counted first (the bar's total; Parquet counts from its footers).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from raftlog.pipeline.jobs.progress_bar import ProgressBar
from raftlog.pipeline.jobs.runner import EXIT_OK, JobError, add_common_arguments, run_job

# Spark's file split size follows its default parallelism (the master's cores) unless these
# are fixed; fixed, the same files give the same tasks on any master (module rules).
PINNED_SPLITS = {
    "spark.sql.files.maxPartitionBytes": str(128 << 20),
    "spark.sql.files.openCostInBytes": str(4 << 20),
    "spark.sql.files.minPartitionNum": "8",
}
SENT_COLUMNS = ("value", "key", "tags", "properties")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raftlog pipeline import",
        description="Import Parquet or CSV files into a topic through the exactly-once sink. "
        "Re-running with the same --job-id and the same files stores nothing twice.",
    )
    add_common_arguments(parser)
    parser.add_argument("--topic", required=True, help="the topic to write to")
    parser.add_argument("--input", required=True, help="a file or directory of files")
    parser.add_argument(
        "--format",
        choices=("parquet", "csv"),
        default=None,
        help="the input's format (default: from --input's suffix)",
    )
    parser.add_argument(
        "--no-header", action="store_true", help="CSV: the first line is data, not names"
    )
    parser.add_argument(
        "--job-id",
        default=None,
        help="a name for this import: the same id re-run on the same files writes nothing "
        "twice (default: a fresh id, so a re-run writes again)",
    )
    return parser


def check(args: argparse.Namespace) -> None:
    """JobError unless the input exists and its format is known (before Spark starts)."""
    if not os.path.exists(args.input):
        raise JobError(f"--input {args.input!r}: no such file or directory")
    input_format(args)


def input_format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    for suffix in ("parquet", "csv"):
        if args.input.rstrip("/").lower().endswith("." + suffix):
            return suffix
    raise JobError(f"--input {args.input!r}: say --format parquet or --format csv")


@contextlib.contextmanager
def pinned_splits(spark: Any) -> Iterator[None]:
    """``PINNED_SPLITS`` set for the block, the session's own values restored after."""
    before = {name: spark.conf.get(name, None) for name in PINNED_SPLITS}
    for name, value in PINNED_SPLITS.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, value)


def sink_columns(df: Any) -> Any:
    """The columns the sink sends, checked: ``value`` required, ``properties`` as a map."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType, StringType

    types = {field.name: field.dataType for field in df.schema.fields}
    if "value" not in types:
        raise JobError(f"the input has no 'value' column (it has: {', '.join(types) or 'none'})")
    columns = [F.col(name) for name in SENT_COLUMNS if name in types and name != "properties"]
    if isinstance(types.get("properties"), StringType):
        columns.append(F.from_json("properties", "map<string,string>").alias("properties"))
    elif isinstance(types.get("properties"), MapType):
        columns.append(F.col("properties"))
    elif "properties" in types:
        raise JobError(
            f"column 'properties' must be a map or a JSON string, not {types['properties']}"
        )
    return df.select(*columns)


def run(spark: Any, args: argparse.Namespace) -> int:
    """Import ``args.input`` into ``args.topic``; prints how many rows it sent."""
    kind = input_format(args)
    started = time.monotonic()
    with pinned_splits(spark):
        # RFC 4180 quoting (a quote inside a quoted field is doubled), not Spark's backslash.
        reader = spark.read.option("header", str(not args.no_header).lower()).option("escape", '"')
        df = sink_columns(reader.format(kind).load(args.input))
        rows = df.count()
        writer = (
            df.write.format("raftlog")
            .option("servers", args.servers)
            .option("topic", args.topic)
            .option("timeoutMs", str(args.timeout_ms))
        )
        if args.job_id is not None:
            writer = writer.option("jobId", args.job_id)
        with ProgressBar(spark, f"import {args.topic}", rows, "rows"):
            writer.mode("append").save()
    job = f"job id {args.job_id}" if args.job_id else "a fresh job id"
    print(
        f"imported {rows} rows from {args.input} into {args.topic} ({job}; rows a re-run of "
        f"the same job id had already stored were not stored again) in "
        f"{time.monotonic() - started:.1f} s"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_job("import", build_parser(), run, argv, check=check)


if __name__ == "__main__":
    sys.exit(main())
