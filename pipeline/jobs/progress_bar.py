"""A plain-text progress bar on stderr for the batch jobs (export, import, audit).

Rules this module keeps:
- Progress is read from Spark's status tracker, never from the tasks: the share of finished
  tasks over every stage of the jobs run inside the bar (a Spark job group), times the
  total the job planned (offsets, rows). Input partitions are cut to similar sizes, so this
  is an estimate with task granularity; the last line, printed when the work is done, is
  exact (100%).
- On a terminal one line is redrawn (``\\r``); otherwise (a log file, a test) a line is
  printed at most every ``LOG_INTERVAL_S``, so a log is not flooded.
- The polling thread is a daemon, polls every ``POLL_INTERVAL_S`` and stops with the bar.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from types import TracebackType
from typing import Any, TextIO

POLL_INTERVAL_S = 0.5
LOG_INTERVAL_S = 5.0
BAR_WIDTH_CHARS = 24


def render(what: str, done: int, total: int, unit: str, elapsed_s: float) -> str:
    """``what [#####-----]  45%  1,234/2,742 offsets  820 rows/s  1.5 s``."""
    fraction = 1.0 if total <= 0 else min(1.0, done / total)
    filled = int(fraction * BAR_WIDTH_CHARS)
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    return (
        f"{what} [{'#' * filled}{'-' * (BAR_WIDTH_CHARS - filled)}] {fraction:4.0%}  "
        f"{done:,}/{total:,} {unit}  {rate:,.0f} rows/s  {elapsed_s:.1f} s"
    )


class ProgressBar:
    """``with ProgressBar(spark, "export t", total, "offsets"): df.write...`` draws the bar
    while the Spark jobs started inside the block run."""

    def __init__(
        self, spark: Any, what: str, total: int, unit: str, stream: TextIO | None = None
    ) -> None:
        self._context = spark.sparkContext
        self._what = what
        self._total = total
        self._unit = unit
        self._stream = stream if stream is not None else sys.stderr
        self._group = f"raftlog-{uuid.uuid4().hex[:12]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._draw, name="progress-bar", daemon=True)
        self._started = 0.0
        self._tty = self._stream.isatty()

    def __enter__(self) -> ProgressBar:
        self._context.setJobGroup(self._group, self._what)
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._context.setLocalProperty("spark.jobGroup.id", None)
        self._context.setLocalProperty("spark.job.description", None)
        done = self._total if exc_type is None else self._done()
        self._print(render(self._what, done, self._total, self._unit, self._elapsed_s()), True)

    def _elapsed_s(self) -> float:
        return time.monotonic() - self._started

    def _done(self) -> int:
        """The planned total times the share of finished tasks (module rules)."""
        tracker = self._context.statusTracker()
        finished = tasks = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    finished += stage.numCompletedTasks
                    tasks += stage.numTasks
        return 0 if tasks == 0 else self._total * finished // tasks

    def _draw(self) -> None:
        last_logged = time.monotonic()
        # Bounded: ends when the bar is closed (the block's work is done or failed).
        while not self._stop.wait(POLL_INTERVAL_S):
            if not self._tty and time.monotonic() - last_logged < LOG_INTERVAL_S:
                continue
            last_logged = time.monotonic()
            line = render(self._what, self._done(), self._total, self._unit, self._elapsed_s())
            self._print(line, False)

    def _print(self, line: str, final: bool) -> None:
        if self._tty:
            self._stream.write("\r" + line + ("\n" if final else ""))
        else:
            self._stream.write(line + "\n")
        self._stream.flush()
