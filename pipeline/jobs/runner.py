"""What the pipeline jobs share: their common arguments, the SparkSession, the offset plan
pinned on the driver, and turning failures into exit statuses.

Rules this module keeps:
- Exit statuses as the ``raftlog`` CLI's: 0 done, 1 the job failed (an unreachable cluster,
  a failed Spark job), 2 a bad argument or option; the message is one line on stderr, no
  traceback. The audit adds 4 (replicas differ).
- The cluster is asked once, before the JVM starts, so an unreachable one fails in seconds.
- A batch job reads an offset range pinned on the driver (``Plan``): every queue's
  ``[start, end)`` named explicitly, so what arrives while the job runs is not read, the
  progress bar knows its total, and an audit reads every replica over the same offsets.
- ``--master`` unset leaves the master to spark-submit, whose default is ``local[*]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from raftlog.client import Admin, RaftlogError
from raftlog.pipeline.options import OptionError, read_options
from raftlog.pipeline.queue_ranges import ClusterView, QueueRange, batch_ranges

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
# The reachability check's bound: a live cluster answers a status call in well under this.
_REACHABLE_TIMEOUT_S = 5.0

JobRun = Callable[[Any, argparse.Namespace], int]
JobCheck = Callable[[argparse.Namespace], None]


class JobError(ValueError):
    """A job's arguments do not make sense together (exit status 2)."""


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``--servers``, ``--master`` and ``--timeout-ms``: every job has them."""
    parser.add_argument(
        "--servers",
        required=True,
        help="the cluster's members, host:port comma separated",
    )
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master, e.g. spark://host:7077 (default: spark-submit's, local[*])",
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        default=30000,
        help="how long one read or write may wait for the cluster (default 30000)",
    )


def add_offset_arguments(parser: argparse.ArgumentParser) -> None:
    """``--starting-offsets`` / ``--ending-offsets`` as the source's options."""
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help='earliest (default), latest or JSON {"topic": {"0": 23}}',
    )
    parser.add_argument(
        "--ending-offsets",
        default="latest",
        help='latest (default) or JSON {"topic": {"0": 42}} (exclusive ends)',
    )


def session(master: str | None, app_name: str) -> Any:
    """A SparkSession with the ``raftlog`` source registered; the workers run this
    interpreter unless PYSPARK_PYTHON says otherwise (docs/pipeline.md, pitfall 2)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from raftlog.pipeline import RaftlogDataSource

    # Spark's own console bar would interleave with the jobs' bar (progress_bar.py).
    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(RaftlogDataSource)
    return spark


def check_reachable(servers: str) -> None:
    """Raise UnavailableError (naming the members tried) unless some member answers."""
    with Admin(servers, timeout_s=_REACHABLE_TIMEOUT_S) as admin:
        admin.cluster_status()


def _message(error: BaseException) -> str:
    """The first line that says something, without Spark's or py4j's stack dump."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__


def run_job(
    name: str,
    parser: argparse.ArgumentParser,
    run: JobRun,
    argv: Sequence[str],
    check: JobCheck | None = None,
) -> int:
    """Parse ``argv``, ``check`` the arguments, check the cluster answers, start Spark,
    ``run`` the job, stop Spark; every failure becomes one line on stderr and an exit status
    (module rules). Nothing before ``run`` starts a JVM."""
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exit_request:  # argparse printed the usage error or the help
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_USAGE
    prefix = f"raftlog pipeline {name}"
    try:
        if check is not None:
            check(args)
        try:
            check_reachable(args.servers)
        except RaftlogError as error:
            print(f"{prefix}: cannot reach the cluster at {args.servers}: {error}", file=sys.stderr)
            return EXIT_FAILED
        spark = session(args.master, f"raftlog-{name}")
        try:
            return run(spark, args)
        finally:
            spark.stop()
    except (OptionError, JobError) as error:
        print(f"{prefix}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except RaftlogError as error:
        print(f"{prefix}: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as error:
        from pyspark.errors import PySparkException

        # Spark's failures (a failed task, a failed query) arrive as PySparkException.
        if not isinstance(error, PySparkException):
            raise
        print(f"{prefix}: the Spark job failed: {_message(error)}", file=sys.stderr)
        return EXIT_FAILED


@dataclass(frozen=True)
class Plan:
    """The offsets a batch job reads, pinned: every queue's ``[start, end)``."""

    topic: str
    ranges: tuple[QueueRange, ...]
    starting_json: str
    ending_json: str

    @property
    def total_offsets(self) -> int:
        return sum(r.size for r in self.ranges)

    def source_options(self, servers: str, timeout_ms: int) -> dict[str, str]:
        """The ``raftlog`` source's options that read exactly this plan."""
        return {
            "servers": servers,
            "topic": self.topic,
            "startingOffsets": self.starting_json,
            "endingOffsets": self.ending_json,
            "timeoutMs": str(timeout_ms),
        }


def check_offsets(args: argparse.Namespace) -> None:
    """OptionError unless ``--topic`` and the offset arguments parse (no cluster asked)."""
    options = read_options(_offset_options(args), streaming=False)
    if len(options.topics) != 1:
        raise JobError(f"--topic: one topic per job, not {args.topic!r}")
    if args.timeout_ms <= 0:
        raise JobError(f"--timeout-ms must be positive, not {args.timeout_ms}")


def _offset_options(args: argparse.Namespace) -> dict[str, str]:
    return {
        "servers": args.servers,
        "topic": args.topic,
        "startingOffsets": args.starting_offsets,
        "endingOffsets": args.ending_offsets,
    }


def plan_offsets(args: argparse.Namespace) -> Plan:
    """Resolve ``--starting-offsets`` / ``--ending-offsets`` of ``args.topic`` now, on the
    driver, as the leader sees the queues. A queue with nothing to read is pinned to an empty
    range at its current end."""
    check_offsets(args)
    options = read_options(_offset_options(args), streaming=False)
    topic = options.topics[0]
    with Admin(args.servers, timeout_s=args.timeout_ms / 1000) as admin:
        view = ClusterView(admin)  # asks the leader for the queues' ends
        ranges, _ = batch_ranges(options, view)
        bounds = view.bounds(topic)
    by_queue = {r.queue_id: r for r in ranges}
    starting = {str(q): by_queue[q].start if q in by_queue else b.max for q, b in bounds.items()}
    ending = {str(q): by_queue[q].end if q in by_queue else b.max for q, b in bounds.items()}
    return Plan(
        topic,
        tuple(sorted(ranges, key=lambda r: r.queue_id)),
        json.dumps({topic: starting}),
        json.dumps({topic: ending}),
    )
