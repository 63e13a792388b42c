"""The pipeline jobs on a real Spark standalone cluster (a master and two workers started
from the pyspark package, tests/support/spark_standalone.py), submitted with spark-submit:
the export (a batch job) and the windowed count (a streaming query) run with their readers
and writers pickled to executors in other processes, against the live three-node cluster.

They run as spark-submit subprocesses, not in the test run's SparkSession (one per process).
Slow (JVMs for the master, two workers, two drivers and their executors): `make test-slow`.
"""

from __future__ import annotations

import importlib.util
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftlog.client import Admin, Producer
from tests.support.spark_standalone import StandaloneSpark

pytestmark = [pytest.mark.integration, pytest.mark.slow]
QUEUES = 4
TAGS = ("red", "green", "blue")


def job_file(module: str) -> str:
    spec = importlib.util.find_spec(f"raftlog.pipeline.jobs.{module}")
    assert spec is not None and spec.origin is not None
    return spec.origin


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install '.[pipeline]'")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: Spark needs a JVM")
    with StandaloneSpark(tmp_path_factory.mktemp("spark_standalone")) as cluster:
        yield cluster


def produce(servers: str, topic: str, count: int) -> list[Any]:
    with Admin(servers) as admin:
        admin.create_topic(topic, QUEUES)
    with Producer(servers) as producer:
        sent = [
            producer.send(topic, b"v%d" % i, tags=TAGS[i % len(TAGS)], queue_id=i % QUEUES)
            for i in range(count)
        ]
        time.sleep(2.5)  # the flush message's window starts after every data window ended
        producer.send(topic, b"flush", tags="flush", queue_id=0)
    return sent


def submitted(cluster: StandaloneSpark, module: str, args: list[str]) -> str:
    result = cluster.submit(job_file(module), args, timeout_s=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_export_and_a_streaming_query_run_on_a_standalone_cluster(
    standalone: StandaloneSpark, servers: str, topic_name: str, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    sent = produce(servers, topic_name, 200)
    exported = tmp_path / "export"
    args = ["--servers", servers, "--topic", topic_name, "--output", str(exported)]
    assert "exported 201 records" in submitted(
        standalone, "export", [*args, "--min-partitions", "4"]
    )
    table = pq.read_table(exported).to_pylist()
    by_place = {(r["queue_id"], r["queue_offset"]): r for r in table}
    assert len(by_place) == 201
    for i, result in enumerate(sent):
        assert by_place[(result.queue_id, result.queue_offset)]["value"] == b"v%d" % i
    # Both workers ran an executor of the export (its readers were pickled to them).
    for index in range(standalone.workers):
        assert list(standalone.worker_dir(index).glob("app-*/*/stderr")), index

    expected: dict[tuple[int, str], int] = {}
    for row in table:
        if row["tags"] != "flush":
            at_ms = int(row["store_timestamp"].timestamp() * 1000)
            key = (at_ms - at_ms % 2000, row["tags"])
            expected[key] = expected.get(key, 0) + 1
    counts = tmp_path / "counts"
    submitted(
        standalone,
        "windowed_count",
        [
            "--servers", servers, "--topic", topic_name, "--window", "2 seconds",
            "--watermark", "0 seconds", "--starting-offsets", "earliest",
            "--output-path", str(counts), "--checkpoint", str(tmp_path / "checkpoint"),
            "--max-batches", "2", "--timeout-s", "300", "--trigger-s", "0.5",
        ],
    )  # fmt: skip
    got = {
        (int(r["window_start"].timestamp() * 1000), r["tag"]): r["count"]
        for r in pq.read_table(counts).to_pylist()
    }
    assert got == expected
