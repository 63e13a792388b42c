"""A real Spark standalone cluster for tests: one master and N workers started from the
installed pyspark package (``bin/spark-class``), and ``spark-submit`` against it.

Why it lives here and not in raftlog.pipeline or raftlog.testing: it is test scaffolding
(users run their own Spark cluster), raftlog.pipeline may not import raftlog.testing, and it
needs nothing of raftlog at all.

Rules this module keeps:
- Everything binds 127.0.0.1 (``SPARK_LOCAL_IP``, ``--host``) on free ports, web UIs
  included; work, log and conf directories are under the root it is given, so a test leaves
  nothing behind it did not create.
- Executors and the driver run the interpreter of the test (``PYSPARK_PYTHON``), which
  imports raftlog from the installed package: jobs are really pickled to other processes.
- Each process is started in its own session, so its process group holds it and the
  executors it spawns; ``stop`` ends exactly those groups (TERM, then KILL after a grace
  period), never anything found by name.
- Every wait is bounded, and a process that dies while being waited for fails the wait with
  the tail of its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

START_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0
_POLL_S = 0.5


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spark_home() -> Path:
    """The pyspark package's directory: it carries bin/spark-class and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneSpark:
    """``with StandaloneSpark(root) as cluster: cluster.submit(job, args)``."""

    def __init__(self, root: Path, workers: int = 2, worker_memory: str = "1g") -> None:
        self.root = root
        self.port = free_port()
        self.ui_port = free_port()
        self.workers = workers
        self.worker_memory = worker_memory
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_CONF_DIR": str(self._dir("conf")),
            "SPARK_LOG_DIR": str(self._dir("logs")),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def worker_dir(self, index: int) -> Path:
        return self._dir(f"worker-{index}")

    def _spawn(self, name: str, java_class: str, *args: str) -> None:
        log = (self._dir("logs") / f"{name}.log").open("wb")
        command = [str(spark_home() / "bin" / "spark-class"), java_class, *args]
        process = subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()  # the child holds its own descriptor
        self._processes.append((name, process))

    def log_tail(self, name: str, lines: int = 20) -> str:
        path = self._dir("logs") / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> None:
        """Start the master and the workers; return once every worker is ALIVE."""
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
        )  # fmt: skip
        for index in range(self.workers):
            self._spawn(
                f"worker-{index}",
                "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--webui-port", str(free_port()), "--cores", "1",
                "--memory", self.worker_memory, "--work-dir", str(self.worker_dir(index)),
                self.master_url,
            )  # fmt: skip
        self._wait_workers()

    def _alive_workers(self) -> int:
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                state = json.load(answer)
        except (OSError, ValueError):
            return 0  # the master's UI is not up yet
        return int(state.get("aliveworkers", 0))

    def _wait_workers(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for name, process in self._processes:
                if process.poll() is not None:
                    raise RuntimeError(f"spark {name} exited: {self.log_tail(name)}")
            if self._alive_workers() >= self.workers:
                return
            time.sleep(_POLL_S)
        raise RuntimeError(
            f"{self.workers} workers did not register with {self.master_url} within "
            f"{START_TIMEOUT_S:.0f} s: {self.log_tail('master')}"
        )

    def submit(
        self, script: str, args: list[str], timeout_s: float = 600.0
    ) -> subprocess.CompletedProcess[str]:
        """``spark-submit --master <this cluster> script args``, waited for (bounded)."""
        command = [
            str(spark_home() / "bin" / "spark-submit"),
            "--master", self.master_url,
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.driver.memory=1g",
            "--conf", "spark.executor.memory=512m",
            script, *args,
        ]  # fmt: skip
        return subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=timeout_s, check=False
        )

    def stop(self) -> None:
        """End the process groups this cluster started (workers first), TERM then KILL."""
        for _, process in reversed(self._processes):
            self._end(process)
        self._processes.clear()

    @staticmethod
    def _end(process: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(process.pid, signal.SIGTERM)  # its own group: start_new_session
        except ProcessLookupError:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE_S)
        # What is left of the group (a worker's executors, a JVM that ignored TERM) goes now.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_GRACE_S)

    def __enter__(self) -> StandaloneSpark:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
