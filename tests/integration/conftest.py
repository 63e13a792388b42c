"""Fixtures of the Spark pipeline tests (tests/integration/test_pipeline_*.py): ONE
SparkSession for the whole run and one live three-node cluster, both started on first use.

The session follows the pitfalls docs/pipeline.md lists: master ``local[2,4]`` (two cores;
up to four attempts per task, so a task failed on purpose is retried: local mode retries
only with the second number above 1), the UI off, 1 GiB of driver memory,
``SPARK_LOCAL_IP=127.0.0.1`` and the workers running this interpreter (``PYSPARK_PYTHON``),
which imports raftlog.pipeline from the installed package. Filter pushdown is enabled for
the session; readers without the ``pushdown`` option do not use it.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftlog.testing.local_cluster import LocalCluster

SPARK_MASTER = "local[2,4]"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install '.[pipeline]'")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed: pip install '.[pipeline]'")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from raftlog.pipeline import RaftlogDataSource

    session = (
        SparkSession.builder.master(SPARK_MASTER)
        .appName("raftlog-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(RaftlogDataSource)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def pipeline_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root: Path = tmp_path_factory.mktemp("pipeline_cluster")
    running = LocalCluster(str(root / "data"), base_port=0, durability="write")
    running.start(wait_timeout_s=30)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def servers(pipeline_cluster: LocalCluster) -> str:
    return ",".join(pipeline_cluster.addresses)


@pytest.fixture
def topic_name() -> str:
    """A fresh topic name per test (topics are created by the tests)."""
    return f"p{uuid.uuid4().hex[:12]}"
