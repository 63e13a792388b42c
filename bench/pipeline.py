"""The Spark pipeline benchmark (issue 14): the ``raftlog`` source and sink against Parquet,
measured side by side in one run on a live local 3-node cluster.

Run by hand (it is not a timed test): ``raftlog bench pipeline [--rows N] [--quick] [--json
PATH]``. It starts three node processes on 127.0.0.1, produces ``--rows`` messages of 1 KiB
bodies (raw gRPC stub, several calls in flight: setting up is not what is measured), writes
the same rows once to Parquet through the source, then measures, ``--rounds`` times each,
alternating:

- ``read raftlog``: ``spark.read.format("raftlog")`` of every queue, written to Spark's
  ``noop`` sink, which materialises every column of every row (all bytes cross from the
  Python workers into the JVM);
- ``read parquet``: the same rows from the Parquet copy, to the same ``noop`` sink;

and once ``write raftlog``: ``--rows`` generated rows of 1 KiB values written through the
idempotent sink (``df.write.format("raftlog")``), their count checked on the cluster after.

Targets (issue 14): read >= 1M rows/s, within 2x of Parquet in the same run; write >= 200k
rows/s. The table and the JSON say which are met.

Rules this module keeps:
- Every step is bounded by a row count AND a time budget: the fill by ``run_bounded``, each
  Spark action by a timer that cancels the session's jobs (``--max-seconds``), so a hung
  action ends the run with an error instead of hanging it.
- Spark runs ``local[2]`` with a 1 GiB driver, the UI off and ``SPARK_LOCAL_IP=127.0.0.1``;
  its Python workers run this interpreter. The cluster, Spark and the bench share the
  machine: the figures are a whole-box measurement, and the JSON records the load average.
- The cluster's data and the Parquet copy live in a fresh temporary directory under ``--dir``,
  deleted at the end; the cluster is always stopped, only its own node processes signalled.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import grpc

from raftlog.bench.cluster import (
    CHANNEL_OPTIONS,
    PRODUCER_STUB,
    BenchError,
    build_request,
    produce_windowed,
    running_cluster,
    source_description,
)
from raftlog.bench.report import Budget, write_json_report
from raftlog.client.admin import Admin

BODY_BYTES = 1024
QUEUE_COUNT = 4
FILL_BATCH = 256
FILL_WINDOW = 8
# Produce requests cycled through while filling (unique keys repeat every this many batches).
FILL_POOL_SIZE = 16
SOURCE_TOPIC = "pipeline-source"
SINK_TOPIC = "pipeline-sink"
SPARK_MASTER = "local[2]"
TARGET_READ_ROWS_PER_S = 1_000_000
TARGET_READ_PARQUET_RATIO = 2.0
TARGET_WRITE_ROWS_PER_S = 200_000


@dataclass(slots=True)
class PipelineMeasurement:
    """One timed Spark action: ``rows`` rows in ``seconds``."""

    workload: str
    rows: int
    seconds: float
    params: dict[str, object] = field(default_factory=dict)
    rows_per_s: float = field(init=False)
    mib_per_s: float = field(init=False)

    def __post_init__(self) -> None:
        self.rows_per_s = self.rows / self.seconds if self.seconds > 0 else 0.0
        self.mib_per_s = self.rows_per_s * BODY_BYTES / (1 << 20)


@dataclass(frozen=True, slots=True)
class Settings:
    rows: int
    rounds: int
    min_partitions: int
    action_budget_s: float
    fill_budget_s: float


def _spark_session() -> Any:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from raftlog.pipeline import RaftlogDataSource

    session = (
        SparkSession.builder.master(SPARK_MASTER)
        .appName("raftlog-bench-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(RaftlogDataSource)
    return session


@contextmanager
def _bounded(spark: Any, what: str, seconds: float) -> Iterator[None]:
    """Cancel the session's jobs if the block's Spark action runs past ``seconds``."""
    fired = threading.Event()

    def cancel() -> None:
        fired.set()
        spark.sparkContext.cancelAllJobs()

    timer = threading.Timer(seconds, cancel)
    timer.start()
    try:
        yield
    except Exception as error:
        if fired.is_set():
            raise BenchError(f"{what} ran past its budget of {seconds:.0f} s") from error
        raise
    finally:
        timer.cancel()


def _timed(spark: Any, what: str, seconds: float, action: Callable[[], object]) -> float:
    with _bounded(spark, what, seconds):
        start = time.perf_counter()
        action()
        return time.perf_counter() - start


def fill(address: str, rows: int, budget_s: float) -> int:
    """Produce ``rows`` messages of ``BODY_BYTES`` (whole batches) round robin over the source
    topic's queues; returns how many were acknowledged."""
    requests = [
        build_request(SOURCE_TOPIC, BODY_BYTES, FILL_BATCH, i * FILL_BATCH, QUEUE_COUNT)
        for i in range(FILL_POOL_SIZE)
    ]
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        acked, _ = produce_windowed(
            PRODUCER_STUB(channel), requests, FILL_BATCH, FILL_WINDOW, Budget(rows, budget_s)
        )
    return acked


def topic_rows(admin: Admin, topic: str) -> int:
    return sum(q.max_queue_offset - q.min_queue_offset for q in admin.describe_topic(topic).queues)


def _source(spark: Any, servers: str, settings: Settings) -> Any:
    return (
        spark.read.format("raftlog")
        .option("servers", servers)
        .option("topic", SOURCE_TOPIC)
        .option("minPartitions", str(settings.min_partitions))
        .load()
    )


def measure_reads(
    spark: Any, servers: str, parquet_path: str, rows: int, settings: Settings
) -> list[PipelineMeasurement]:
    """``settings.rounds`` rounds of (raftlog read, Parquet read), each to the noop sink."""
    measured: list[PipelineMeasurement] = []
    params = {"min_partitions": settings.min_partitions, "sink": "noop"}
    for round_number in range(settings.rounds):
        for workload, frame in (
            ("read raftlog", lambda: _source(spark, servers, settings)),
            ("read parquet", lambda: spark.read.parquet(parquet_path)),
        ):
            seconds = _timed(
                spark,
                workload,
                settings.action_budget_s,
                lambda frame=frame: frame().write.format("noop").mode("overwrite").save(),  # type: ignore[misc]
            )
            row = PipelineMeasurement(workload, rows, seconds, {**params, "round": round_number})
            _progress(row)
            measured.append(row)
    return measured


def measure_write(
    spark: Any, servers: str, admin: Admin, settings: Settings
) -> PipelineMeasurement:
    """``settings.rows`` generated 1 KiB rows through the idempotent sink, counted after."""
    frame = spark.range(settings.rows, numPartitions=2).selectExpr(
        f"CAST(substring(concat(CAST(id AS STRING), repeat('x', {BODY_BYTES})), 1, {BODY_BYTES})"
        " AS BINARY) AS value"
    )
    seconds = _timed(
        spark,
        "write raftlog",
        settings.action_budget_s,
        lambda: (
            frame.write.format("raftlog")
            .option("servers", servers)
            .option("topic", SINK_TOPIC)
            .mode("append")
            .save()
        ),
    )
    stored = topic_rows(admin, SINK_TOPIC)
    if stored != settings.rows:
        raise BenchError(f"the sink stored {stored} rows, {settings.rows} were written")
    row = PipelineMeasurement("write raftlog", stored, seconds, {"partitions": 2})
    _progress(row)
    return row


def _progress(row: PipelineMeasurement) -> None:
    print(
        f"  {row.workload}: {row.rows:,} rows in {row.seconds:.2f} s, {row.rows_per_s:,.0f} rows/s",
        file=sys.stderr,
        flush=True,
    )


def summary(rows: list[PipelineMeasurement]) -> dict[str, object]:
    """The best round of each workload, the read ratio and which targets are met."""
    best: dict[str, float] = {}
    for row in rows:
        best[row.workload] = max(best.get(row.workload, 0.0), row.rows_per_s)
    read = best.get("read raftlog", 0.0)
    parquet = best.get("read parquet", 0.0)
    write = best.get("write raftlog", 0.0)
    ratio = parquet / read if read > 0 else float("inf")
    return {
        "read_raftlog_rows_per_s": read,
        "read_parquet_rows_per_s": parquet,
        "raftlog_to_parquet_time_ratio": ratio,
        "write_raftlog_rows_per_s": write,
        "targets": {
            f"read >= {TARGET_READ_ROWS_PER_S:,} rows/s": read >= TARGET_READ_ROWS_PER_S,
            f"read within {TARGET_READ_PARQUET_RATIO:g}x of Parquet": ratio
            <= TARGET_READ_PARQUET_RATIO,
            f"write >= {TARGET_WRITE_ROWS_PER_S:,} rows/s": write >= TARGET_WRITE_ROWS_PER_S,
        },
    }


def render_table(rows: list[PipelineMeasurement], totals: dict[str, object]) -> str:
    lines = ["| workload | round | rows | seconds | rows/s | MiB/s |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row.workload} | {row.params.get('round', '-')} | {row.rows:,} | "
            f"{row.seconds:.2f} | {row.rows_per_s:,.0f} | {row.mib_per_s:,.0f} |"
        )
    ratio = totals["raftlog_to_parquet_time_ratio"]
    lines.append(f"\nraftlog read time / Parquet read time: {ratio:.2f}x")
    targets = totals["targets"]
    assert isinstance(targets, dict)
    lines += [f"- {name}: {'met' if met else 'MISSED'}" for name, met in targets.items()]
    return "\n".join(lines)


def run(root: str, settings: Settings) -> tuple[list[PipelineMeasurement], dict[str, object]]:
    """Start the cluster, fill it, measure; the cluster is always stopped."""
    with running_cluster("write", root) as (cluster, leader):
        servers = ",".join(cluster.addresses)
        with Admin(cluster.addresses) as admin:
            admin.create_topic(SOURCE_TOPIC, QUEUE_COUNT)
            admin.create_topic(SINK_TOPIC, QUEUE_COUNT)
            produced = fill(leader, settings.rows, settings.fill_budget_s)
            rows = topic_rows(admin, SOURCE_TOPIC)
            print(f"  filled {rows:,} rows ({produced:,} acknowledged)", file=sys.stderr)
            spark = _spark_session()
            try:
                parquet_path = os.path.join(root, "copy.parquet")
                _timed(
                    spark,
                    "the Parquet copy",
                    settings.action_budget_s,
                    lambda: _source(spark, servers, settings).write.parquet(parquet_path),
                )
                measured = measure_reads(spark, servers, parquet_path, rows, settings)
                measured.append(measure_write(spark, servers, admin, settings))
            finally:
                spark.stop()
        info: dict[str, object] = {
            "leader": leader,
            "nodes": {n.node_id: n.address for n in cluster.nodes.values()},
        }
    return measured, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftlog bench pipeline", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    parser.add_argument("--dir", default="./data/bench", help="where temporary data goes")
    parser.add_argument("--quick", action="store_true", help="a smoke run on 5,000 rows")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows read and written")
    parser.add_argument("--rounds", type=int, default=3, help="read rounds (best one counts)")
    parser.add_argument("--min-partitions", type=int, default=4, help="the source's option")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="per Spark action")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.rounds < 1 or args.max_seconds <= 0 or args.min_partitions < 1:
        parser.error("--rows, --rounds, --min-partitions and --max-seconds must be positive")
    settings = Settings(
        rows=5_000 if args.quick else args.rows,
        rounds=1 if args.quick else args.rounds,
        min_partitions=args.min_partitions,
        action_budget_s=args.max_seconds,
        fill_budget_s=args.max_seconds,
    )
    os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="bench-pipeline-", dir=args.dir)
    source = source_description()
    load_before = os.getloadavg()
    try:
        measured, cluster_info = run(root, settings)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    totals = summary(measured)
    print(render_table(measured, totals))
    if args.json:
        write_json_report(
            args.json,
            "pipeline",
            Budget(settings.rows, settings.action_budget_s),
            settings.rounds,
            measured,
            settings=asdict(settings),
            summary=totals,
            load_average={"before": load_before, "after": os.getloadavg()},
            cluster=cluster_info,
            source=source,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
