"""The ``windowed-count`` job: a streaming count of a topic's messages per tag and event-time
window (event time = the store timestamp), into a topic or into Parquet.

Run it as ``raftlog pipeline windowed-count --servers ... --topic t --window '1 minute'
--checkpoint ck/ --output-path out/`` (or ``--output-topic counts``), or as
``spark-submit pipeline/jobs/windowed_count.py ...``.

Rules this module keeps:
- Append mode: a window is written once, when the watermark (the latest store timestamp
  seen minus ``--watermark``) passes its end; later messages of a closed window are dropped,
  as Spark does. Into a topic the rows go through the exactly-once sink (producer ids from
  the query id and batch id), so a restarted query (same ``--checkpoint``) re-sends an
  unfinished batch without duplicates; into Parquet, Spark's file sink log does the same.
- A topic row: value = JSON ``{"window_start", "window_end", "tag", "count"}`` (times in ISO
  8601 UTC), key and tags = the tag (none for untagged messages).
- ``--max-batches`` / ``--timeout-s`` bound a run: it stops after that many micro-batches
  that ran (counted from Spark's progress reports) or that long, whichever comes first.
  Without either it runs until stopped.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from raftlog.pipeline.jobs.runner import EXIT_OK, JobError, add_common_arguments, run_job
from raftlog.pipeline.options import read_options

POLL_INTERVAL_S = 0.5
# --max-batches alone still ends: a run waits at most this long for its batches.
DEFAULT_BOUND_S = 3600.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raftlog pipeline windowed-count",
        description="Count a topic's messages per tag and store-time window, continuously, "
        "into a topic (exactly once) or into Parquet.",
    )
    add_common_arguments(parser)
    parser.add_argument("--topic", required=True, help="the topic (or comma list) to count")
    parser.add_argument("--window", default="1 minute", help="window length (default 1 minute)")
    parser.add_argument(
        "--watermark", default="10 seconds", help="allowed lateness (default 10 seconds)"
    )
    parser.add_argument(
        "--starting-offsets", default="latest", help="earliest, latest (default) or JSON"
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    outputs = parser.add_mutually_exclusive_group(required=True)
    outputs.add_argument("--output-topic", help="write the counts to this topic")
    outputs.add_argument("--output-path", help="write the counts as Parquet here")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint directory")
    parser.add_argument("--trigger-s", type=float, default=1.0, help="micro-batch interval")
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=4,
        help="state partitions of a new checkpoint (default 4; fixed once it exists)",
    )
    parser.add_argument("--max-batches", type=int, default=None, help="stop after N batches")
    parser.add_argument("--timeout-s", type=float, default=None, help="stop after S seconds")
    return parser


def windowed_counts(df: Any, window: str, watermark: str) -> Any:
    """(window_start, window_end, tag, count) per tag and window of ``store_timestamp``."""
    from pyspark.sql import functions as F

    return (
        df.withWatermark("store_timestamp", watermark)
        .groupBy(F.window("store_timestamp", window).alias("w"), F.col("tags").alias("tag"))
        .count()
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "tag",
            "count",
        )
    )


def _as_messages(counts: Any) -> Any:
    from pyspark.sql import functions as F

    iso = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
    body = F.to_json(
        F.struct(
            F.date_format("window_start", iso).alias("window_start"),
            F.date_format("window_end", iso).alias("window_end"),
            "tag",
            "count",
        )
    )
    return counts.select(body.alias("value"), F.col("tag").alias("key"), F.col("tag").alias("tags"))


def start_query(spark: Any, args: argparse.Namespace) -> Any:
    """Start the streaming query the arguments describe (not waiting for it)."""
    spark.conf.set("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
    reader = (
        spark.readStream.format("raftlog")
        .option("servers", args.servers)
        .option("topic", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .option("timeoutMs", str(args.timeout_ms))
    )
    if args.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    counts = windowed_counts(reader.load(), args.window, args.watermark)
    if args.output_topic:
        writer = (
            _as_messages(counts)
            .writeStream.format("raftlog")
            .option("servers", args.servers)
            .option("topic", args.output_topic)
        )
    else:
        writer = counts.writeStream.format("parquet").option("path", args.output_path)
    return (
        writer.outputMode("append")
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=f"{args.trigger_s} seconds")
        .start()
    )


def await_bounded(query: Any, max_batches: int | None, timeout_s: float | None) -> int:
    """Wait for ``max_batches`` micro-batches or ``timeout_s``, then stop; the batches run."""
    ran: set[int] = set()
    polls = int((timeout_s or DEFAULT_BOUND_S) / POLL_INTERVAL_S) + 1
    for _ in range(polls):  # bounded by the run's time bound
        if query.awaitTermination(POLL_INTERVAL_S):
            break  # stopped elsewhere (a failure raises here)
        # A batch that ran reports an addBatch time; idle triggers report none.
        ran.update(int(p["batchId"]) for p in query.recentProgress if "addBatch" in p["durationMs"])
        if max_batches is not None and len(ran) >= max_batches:
            break
    query.stop()
    return len(ran)


def check(args: argparse.Namespace) -> None:
    """JobError/OptionError unless the numbers are positive and the read options parse."""
    for name in ("max_batches", "trigger_s", "timeout_s", "shuffle_partitions", "timeout_ms"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise JobError(f"--{name.replace('_', '-')} must be positive, not {value}")
    read_options(
        {"servers": args.servers, "topic": args.topic, "startingOffsets": args.starting_offsets},
        streaming=True,
    )


def run(spark: Any, args: argparse.Namespace) -> int:
    """Run the query, bounded when asked; prints how many micro-batches ran."""
    check(args)
    started = time.monotonic()
    query = start_query(spark, args)
    if args.max_batches is None and args.timeout_s is None:
        query.awaitTermination()
        return EXIT_OK
    batches = await_bounded(query, args.max_batches, args.timeout_s)
    where = args.output_topic or args.output_path
    print(
        f"windowed-count: {batches} micro-batches into {where} in "
        f"{time.monotonic() - started:.1f} s (checkpoint {args.checkpoint})"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_job("windowed-count", build_parser(), run, argv, check=check)


if __name__ == "__main__":
    sys.exit(main())
