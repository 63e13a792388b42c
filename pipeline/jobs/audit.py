"""The ``audit`` job: every replica's copy of a topic read over the same offsets, record by
record checksums compared; any difference reported with its queue and offsets.

Run it as ``raftlog pipeline audit --servers ... --topic t`` or as
``spark-submit pipeline/jobs/audit.py ...``. Exit 0: the replicas agree; 4: they differ
(the report names the queues and offsets); 1/2 as every job.

Rules this module keeps:
- Each replica is read with the source's ``replica`` option: its own copy (``this_replica``
  Pulls to that member alone), never another member's answer in its name.
- The offsets are pinned on the driver once (runner.Plan), so every replica is read over
  the same ``[start, end)``; a replica that cannot serve them in ``--timeout-ms`` fails the
  audit (exit 1), it is not reported as agreeing.
- A record's checksum is xxhash64 over everything stored for it (key, body, tags, sorted
  properties, born and store timestamps, message id); a queue's checksum XORs the record
  checksums hashed with their offsets, so it does not depend on the order rows arrive in.
- ``compare_replicas`` works on any such per-record frame, so it is tested on real pulled
  copies with one row altered (the cluster's own copies cannot be corrupted through its API).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from raftlog.client import Admin
from raftlog.pipeline.jobs.progress_bar import ProgressBar
from raftlog.pipeline.jobs.runner import (
    EXIT_OK,
    JobError,
    Plan,
    add_common_arguments,
    add_offset_arguments,
    check_offsets,
    plan_offsets,
    run_job,
)

EXIT_MISMATCH = 4
RECORD_KEY = ("topic", "queue_id", "queue_offset")


@dataclass(frozen=True)
class QueueSums:
    """One replica's copy of one queue: how many records and their combined checksum."""

    replica: str
    topic: str
    queue_id: int
    records: int
    checksum: int


@dataclass(frozen=True)
class Mismatch:
    """One record the replicas disagree on: each replica's checksum, None where missing."""

    topic: str
    queue_id: int
    queue_offset: int
    checksums: dict[str, int | None]


@dataclass
class AuditReport:
    """Per-queue sums of every replica and the records they disagree on (the first
    ``limit`` of ``mismatch_count``)."""

    replicas: tuple[str, ...]
    sums: list[QueueSums] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    mismatch_count: int = 0

    @property
    def agree(self) -> bool:
        return self.mismatch_count == 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raftlog pipeline audit",
        description="Read every replica's own copy of a topic and compare per-record "
        "checksums; exit 4 and name the queues and offsets when the replicas differ.",
    )
    add_common_arguments(parser)
    parser.add_argument("--topic", required=True, help="the topic to audit")
    parser.add_argument(
        "--replicas",
        default=None,
        help="the members to compare, host:port comma separated (default: every member "
        "of the cluster, as its leader lists them)",
    )
    add_offset_arguments(parser)
    parser.add_argument(
        "--max-report",
        type=int,
        default=20,
        help="list at most this many differing records (default 20; all are counted)",
    )
    return parser


def record_checksums(df: Any, replica: str) -> Any:
    """The source's rows of one replica as (replica, topic, queue_id, queue_offset, checksum)."""
    from pyspark.sql import functions as F

    checksum = F.xxhash64(
        "key",
        "value",
        "tags",
        F.array_sort(F.map_entries("properties")),
        "timestamp",
        "store_timestamp",
        "msg_id",
    )
    return df.select(F.lit(replica).alias("replica"), *RECORD_KEY, checksum.alias("checksum"))


def _queue_sums(checksums: Any) -> list[QueueSums]:
    from pyspark.sql import functions as F

    rows = (
        checksums.groupBy("replica", "topic", "queue_id")
        .agg(
            F.count("*").alias("records"),
            F.bit_xor(F.xxhash64("queue_offset", "checksum")).alias("checksum"),
        )
        .collect()
    )
    return sorted(
        (QueueSums(r.replica, r.topic, r.queue_id, r.records, r.checksum) for r in rows),
        key=lambda s: (s.topic, s.queue_id, s.replica),
    )


def compare_replicas(checksums: Any, replicas: Sequence[str], limit: int) -> AuditReport:
    """Compare ``record_checksums`` rows of several replicas: a record differs when some
    replica lacks it or the checksums are not all equal."""
    from pyspark.sql import functions as F

    checksums = checksums.persist()
    try:
        report = AuditReport(tuple(replicas), _queue_sums(checksums))
        by_record = checksums.groupBy(*RECORD_KEY).agg(
            F.map_from_entries(F.collect_list(F.struct("replica", "checksum"))).alias("sums")
        )
        differing = by_record.where(
            (F.size("sums") < len(replicas)) | (F.size(F.array_distinct(F.map_values("sums"))) > 1)
        ).persist()
        report.mismatch_count = differing.count()
        for row in differing.orderBy(*RECORD_KEY).limit(limit).collect():
            sums = {replica: row.sums.get(replica) for replica in replicas}
            report.mismatches.append(Mismatch(row.topic, row.queue_id, row.queue_offset, sums))
        differing.unpersist()
        return report
    finally:
        checksums.unpersist()


def format_report(report: AuditReport, plan: Plan) -> list[str]:
    """The report as lines: one per queue, then one per differing record listed."""
    lines = []
    sums = {(s.replica, s.queue_id): s for s in report.sums}
    bad_queues = {m.queue_id for m in report.mismatches}
    for queue_range in plan.ranges:
        copies = [sums.get((r, queue_range.queue_id)) for r in report.replicas]
        shown = "  ".join(
            f"{r}={c.records}/{c.checksum & 0xFFFFFFFFFFFFFFFF:016x}" if c else f"{r}=none"
            for r, c in zip(report.replicas, copies, strict=True)
        )
        agree = len({(c.records, c.checksum) if c else None for c in copies}) == 1
        verdict = "ok" if agree and queue_range.queue_id not in bad_queues else "DIFFER"
        lines.append(
            f"{plan.topic} queue {queue_range.queue_id} [{queue_range.start}, "
            f"{queue_range.end}): {shown}  {verdict}"
        )
    for m in report.mismatches:
        shown = "  ".join(
            f"{r}={'missing' if c is None else format(c & 0xFFFFFFFFFFFFFFFF, '016x')}"
            for r, c in m.checksums.items()
        )
        lines.append(f"MISMATCH {m.topic} queue {m.queue_id} offset {m.queue_offset}: {shown}")
    if report.mismatch_count > len(report.mismatches):
        lines.append(f"... and {report.mismatch_count - len(report.mismatches)} more")
    return lines


def _replicas(args: argparse.Namespace) -> list[str]:
    if args.replicas:
        listed = [a.strip() for a in args.replicas.split(",") if a.strip()]
    else:
        with Admin(args.servers, timeout_s=args.timeout_ms / 1000) as admin:
            leader = admin.cluster_status().leader_address or None
            listed = [m.address for m in admin.cluster_status(address=leader).members]
    if len(listed) < 2:
        raise JobError(f"an audit compares at least two replicas, got {listed}")
    return listed


def run(spark: Any, args: argparse.Namespace) -> int:
    """Audit ``args.topic``: prints the report; exit 0 when the replicas agree, else 4."""
    replicas = _replicas(args)
    plan = plan_offsets(args)
    frames = [
        record_checksums(
            spark.read.format("raftlog")
            .options(**plan.source_options(args.servers, args.timeout_ms))
            .option("replica", replica)
            .load(),
            replica,
        )
        for replica in replicas
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    total = plan.total_offsets * len(replicas)
    with ProgressBar(spark, f"audit {plan.topic}", total, "records"):
        report = compare_replicas(union, replicas, args.max_report)
    for line in format_report(report, plan):
        print(line)
    if report.agree:
        print(f"the {len(replicas)} replicas agree on {plan.total_offsets} records")
        return EXIT_OK
    print(f"the replicas differ on {report.mismatch_count} records")
    return EXIT_MISMATCH


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_job("audit", build_parser(), run, argv, check=check_offsets)


if __name__ == "__main__":
    sys.exit(main())
