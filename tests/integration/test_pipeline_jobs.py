"""The pipeline jobs (raftlog.pipeline.jobs) against a live three-node cluster, run in the
test run's one SparkSession through each job's ``run(spark, args)``: export then read the
Parquet back; import CSV and Parquet, and a re-run under the same job id stores nothing
twice; the audit agrees on a healthy cluster and its comparator names a planted difference
in real pulled copies; the windowed count of known tagged messages. The CLI's error paths
(no PySpark, bad arguments, an unreachable cluster) start no JVM and run in-process."""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from raftlog.cli import main as cli_main
from raftlog.client import Admin, Producer

pytestmark = pytest.mark.integration
QUEUES = 3


def produce(servers: str, topic: str, count: int, tags: tuple[str, ...] = ("a",)) -> list[Any]:
    with Admin(servers) as admin:
        admin.create_topic(topic, QUEUES)
    with Producer(servers) as producer:
        return [
            producer.send(
                topic,
                b"\x00body-%d\xff" % i,
                key=f"k{i}",
                tags=tags[i % len(tags)],
                queue_id=i % QUEUES,
                properties={"n": str(i)},
            )
            for i in range(count)
        ]


def job_args(module: Any, *argv: str) -> Any:
    return module.build_parser().parse_args(list(argv))


def source_rows(spark: Any, servers: str, topic: str) -> list[tuple[Any, ...]]:
    df = spark.read.format("raftlog").option("servers", servers).option("topic", topic).load()
    return sorted(
        (bytes(r.value), r.key, r.tags, tuple(sorted((r.properties or {}).items())))
        for r in df.collect()
    )


def test_export_writes_partitioned_parquet_equal_to_the_topic(
    spark: Any, servers: str, topic_name: str, tmp_path: Path, capsys: Any
) -> None:
    from raftlog.pipeline.jobs import export

    sent = produce(servers, topic_name, 90)
    out = tmp_path / "export"
    args = job_args(export, "--servers", servers, "--topic", topic_name, "--output", str(out))
    assert export.run(spark, args) == 0
    captured = capsys.readouterr()
    assert f"exported 90 records of {topic_name}" in captured.out
    assert "100%" in captured.err and "90/90 offsets" in captured.err
    days = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert days and all(d.startswith("date=") for d in days)
    assert {p.name for p in (out / days[0]).iterdir()} <= {f"queue_id={q}" for q in range(QUEUES)}
    exported = {(r.queue_id, r.queue_offset): r for r in spark.read.parquet(str(out)).collect()}
    assert len(exported) == 90
    for i, result in enumerate(sent):
        row = exported[(result.queue_id, result.queue_offset)]
        assert bytes(row.value) == b"\x00body-%d\xff" % i and row.key == f"k{i}".encode()
        assert row.msg_id == result.msg_id and row.properties == {"n": str(i)}
        assert str(row.date) == row.store_timestamp.strftime("%Y-%m-%d")
    ending = json.dumps({topic_name: {"0": 5, "1": 0, "2": 0}})
    part = tmp_path / "part"
    args = job_args(
        export, "--servers", servers, "--topic", topic_name, "--output", str(part),
        "--starting-offsets", json.dumps({topic_name: {"0": 2}}), "--ending-offsets", ending,
    )  # fmt: skip
    assert export.run(spark, args) == 0
    got = sorted((r.queue_id, r.queue_offset) for r in spark.read.parquet(str(part)).collect())
    assert got == [(0, 2), (0, 3), (0, 4)]


def write_csv(path: Path, count: int) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["value", "key", "tags", "properties", "ignored"])
        for i in range(count):
            writer.writerow([f"csv-{i}", f"k{i}", "t" if i % 2 else "", json.dumps({"i": str(i)})])


def imported(count: int, prefix: str) -> list[tuple[Any, ...]]:
    return sorted(
        (f"{prefix}-{i}".encode(), f"k{i}".encode(), "t" if i % 2 else None, (("i", str(i)),))
        for i in range(count)
    )


def test_import_csv_then_a_rerun_with_the_same_job_id_stores_nothing_twice(
    spark: Any, servers: str, topic_name: str, tmp_path: Path, capsys: Any
) -> None:
    from raftlog.pipeline.jobs import importer

    with Admin(servers) as admin:
        admin.create_topic(topic_name, QUEUES)
    data = tmp_path / "in.csv"
    write_csv(data, 700)
    argv = ("--servers", servers, "--topic", topic_name, "--input", str(data))
    with_id = (*argv, "--job-id", f"import-{topic_name}")
    assert importer.run(spark, job_args(importer, *with_id)) == 0
    assert "100%" in capsys.readouterr().err
    assert source_rows(spark, servers, topic_name) == imported(700, "csv")
    assert importer.run(spark, job_args(importer, *with_id)) == 0  # the same job again
    assert source_rows(spark, servers, topic_name) == imported(700, "csv")
    assert importer.run(spark, job_args(importer, *argv)) == 0  # a new job: writes again
    assert source_rows(spark, servers, topic_name) == sorted(imported(700, "csv") * 2)


def test_import_parquet(spark: Any, servers: str, topic_name: str, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raftlog.pipeline.jobs import importer

    with Admin(servers) as admin:
        admin.create_topic(topic_name, QUEUES)
    table = pa.table(
        {
            "value": pa.array([b"pq-%d" % i for i in range(300)], pa.binary()),
            "key": [f"k{i}" for i in range(300)],
            "tags": ["t" if i % 2 else None for i in range(300)],
            "properties": pa.array([[("i", str(i))] for i in range(300)], pa.map_("str", "str")),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    args = job_args(
        importer, "--servers", servers, "--topic", topic_name, "--input", str(tmp_path),
        "--format", "parquet", "--job-id", "pq-once",
    )  # fmt: skip
    assert importer.run(spark, args) == 0
    assert importer.run(spark, args) == 0
    assert source_rows(spark, servers, topic_name) == imported(300, "pq")


def test_audit_agrees_on_a_healthy_cluster(
    spark: Any, servers: str, topic_name: str, capsys: Any
) -> None:
    from raftlog.pipeline.jobs import audit

    produce(servers, topic_name, 60)
    assert audit.run(spark, job_args(audit, "--servers", servers, "--topic", topic_name)) == 0
    out = capsys.readouterr().out
    assert "the 3 replicas agree on 60 records" in out
    assert out.count(" ok\n") == QUEUES and "MISMATCH" not in out


def test_the_audit_comparator_names_a_planted_difference_in_pulled_copies(
    spark: Any, pipeline_cluster: Any, servers: str, topic_name: str
) -> None:
    from pyspark.sql import functions as F

    from raftlog.pipeline.jobs import audit
    from raftlog.pipeline.jobs.runner import plan_offsets

    produce(servers, topic_name, 30)
    replicas = list(pipeline_cluster.addresses)
    plan = plan_offsets(job_args(audit, "--servers", servers, "--topic", topic_name))

    def copy(replica: str) -> Any:
        df = spark.read.format("raftlog").options(**plan.source_options(servers, 30000))
        return df.option("replica", replica).load()

    altered = (F.col("queue_id") == 1) & (F.col("queue_offset") == 3)
    second = copy(replicas[1]).withColumn(
        "value", F.when(altered, F.lit(b"flipped")).otherwise(F.col("value"))
    )
    third = copy(replicas[2]).where(~((F.col("queue_id") == 2) & (F.col("queue_offset") == 7)))
    frames = [copy(replicas[0]), second, third]
    union = audit.record_checksums(frames[0], replicas[0])
    for replica, frame in zip(replicas[1:], frames[1:], strict=True):
        union = union.unionByName(audit.record_checksums(frame, replica))
    report = audit.compare_replicas(union, replicas, limit=10)
    assert report.mismatch_count == 2 and not report.agree
    flipped, missing = report.mismatches
    assert (flipped.queue_id, flipped.queue_offset) == (1, 3)
    assert flipped.checksums[replicas[0]] == flipped.checksums[replicas[2]]
    assert flipped.checksums[replicas[1]] != flipped.checksums[replicas[0]]
    assert (missing.queue_id, missing.queue_offset, missing.checksums[replicas[2]]) == (2, 7, None)
    lines = audit.format_report(report, plan)
    assert f"MISMATCH {topic_name} queue 1 offset 3" in "\n".join(lines)
    assert sum(line.endswith("DIFFER") for line in lines) == 2


def window_of(store_ms: int, window_ms: int) -> int:
    return store_ms - store_ms % window_ms


def test_windowed_count_of_known_tagged_messages(
    spark: Any, servers: str, topic_name: str, tmp_path: Path
) -> None:
    from raftlog.pipeline.jobs import windowed_count

    sent = produce(servers, topic_name, 40, tags=("red", "green", "blue", "red"))
    time.sleep(2.5)  # the flush message's window starts after every data window ended
    with Producer(servers) as producer:
        producer.send(topic_name, b"flush", tags="flush", queue_id=0)
    df = spark.read.format("raftlog").option("servers", servers).option("topic", topic_name)
    stored = [(r.tags, r.store_timestamp) for r in df.load().collect() if r.tags != "flush"]
    assert len(stored) == len(sent)
    expected: dict[tuple[int, str], int] = {}
    for tag, at in stored:
        start_ms = window_of(int(at.timestamp() * 1000), 2000)
        expected[(start_ms, tag)] = expected.get((start_ms, tag), 0) + 1
    common = (
        "--servers", servers, "--topic", topic_name, "--window", "2 seconds",
        "--watermark", "0 seconds", "--starting-offsets", "earliest", "--max-batches", "2",
        "--timeout-s", "120", "--trigger-s", "0.5", "--shuffle-partitions", "2",
    )  # fmt: skip
    out = tmp_path / "counts"
    args = job_args(
        windowed_count, *common, "--output-path", str(out), "--checkpoint", str(tmp_path / "c1")
    )
    assert windowed_count.run(spark, args) == 0
    got = {
        (int(r.window_start.timestamp() * 1000), r.tag): r["count"]
        for r in spark.read.parquet(str(out)).collect()
    }
    assert got == expected
    counts_topic = f"{topic_name}-counts"
    with Admin(servers) as admin:
        admin.create_topic(counts_topic, 1)
    checkpoint = str(tmp_path / "c2")
    args = job_args(
        windowed_count, *common, "--output-topic", counts_topic, "--checkpoint", checkpoint
    )
    assert windowed_count.run(spark, args) == 0
    read = spark.read.format("raftlog").option("servers", servers).option("topic", counts_topic)
    messages = [json.loads(r.value) for r in read.load().collect()]
    assert sorted((m["tag"], m["count"]) for m in messages) == sorted(
        (tag, n) for (_, tag), n in expected.items()
    )


def test_cli_errors_exit_non_zero_before_any_jvm(
    servers: str, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = str(tmp_path / "o")
    assert cli_main(["pipeline", "nosuchjob"]) == 2
    assert cli_main(["pipeline", "export", "--topic", "t", "--output", out]) == 2  # no --servers
    assert "--servers" in capsys.readouterr().err
    bad = ["--servers", servers, "--topic", "t", "--output", out, "--starting-offsets", "soon"]
    assert cli_main(["pipeline", "export", *bad]) == 2
    assert "startingOffsets" in capsys.readouterr().err
    missing = ["--servers", servers, "--topic", "t", "--input", out]
    assert cli_main(["pipeline", "import", *missing]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "x.txt").write_text("value\n")
    no_format = ["--servers", servers, "--topic", "t", "--input", str(tmp_path / "x.txt")]
    assert cli_main(["pipeline", "import", *no_format]) == 2
    assert "--format" in capsys.readouterr().err
    window = ["--servers", servers, "--topic", "t", "--output-path", out, "--checkpoint", out]
    assert cli_main(["pipeline", "windowed-count", *window, "--max-batches", "0"]) == 2
    unreachable = ["--servers", "127.0.0.1:1", "--topic", "t", "--output", out]
    started = time.monotonic()
    assert cli_main(["pipeline", "export", *unreachable]) == 1
    assert "cannot reach the cluster at 127.0.0.1:1" in capsys.readouterr().err
    assert time.monotonic() - started < 30
    monkeypatch.setitem(sys.modules, "pyspark", None)  # as if not installed
    assert cli_main(["pipeline", "audit", "--servers", servers, "--topic", "t"]) == 1
    assert "pip install 'raftlog[pipeline]'" in capsys.readouterr().err
