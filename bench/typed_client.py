"""The user's path for the side-by-side bench: what a raftlog user's code calls, with the
settings a user gets by default.

- ``typed_produce``: ``Producer.send_async`` one message at a time (idempotent, default
  settings), at most ``window`` sends outstanding, as a nats-py user keeps ``publish_async``
  futures outstanding; msgs/s acknowledged. Every result must be ``SEND_OK``.
(``Producer.send`` latency, one at a time, is bench/cluster.py's
``measure_latency_producer``.)

Rules this module keeps: every loop is bounded by a Budget (count and seconds) and every wait
by a timeout; a failed send fails the measurement (BenchError), it never hangs it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from raftlog.bench.cluster import (
    QUEUE_COUNT,
    BenchError,
    topic_name,
)
from raftlog.bench.report import Budget, run_bounded
from raftlog.client import Producer, SendResult

# How long the bench waits for one outstanding send before it calls the run failed.
_SEND_WAIT_S = 30.0


def typed_produce(
    addresses: Sequence[str],
    body_bytes: int,
    window: int,
    budget: Budget,
    *,
    topic: str | None = None,
    queue_count: int = QUEUE_COUNT,
) -> tuple[int, float]:
    """``send_async`` with at most ``window`` outstanding, round robin over ``queue_count``
    queues of ``topic`` (default: the bench topic of that body size); (messages
    acknowledged, seconds)."""
    body = b"x" * body_bytes
    topic = topic or topic_name(body_bytes)
    slots = threading.Semaphore(window)
    problems: list[str] = []
    acked = [0]

    def answered(future: Future[SendResult]) -> None:
        try:
            status = future.result().send_status
            if status != "SEND_OK":
                problems.append(f"send status {status}")
            acked[0] += 1
        except Exception as error:  # a failed send fails the run, never hangs it
            problems.append(repr(error))
        finally:
            slots.release()

    with Producer(list(addresses)) as producer:
        producer.send(topic, body)  # find the leader, untimed
        sent = [0]

        def step() -> int:
            if not slots.acquire(timeout=_SEND_WAIT_S):
                raise BenchError(f"no send answered within {_SEND_WAIT_S:.0f} s")
            if problems:
                raise BenchError(problems[0])
            queue_id = sent[0] % queue_count
            sent[0] += 1
            producer.send_async(topic, body, queue_id=queue_id).add_done_callback(answered)
            return 1

        start = time.perf_counter()
        run_bounded(step, budget)
        for _ in range(window):  # every outstanding send answered
            if not slots.acquire(timeout=_SEND_WAIT_S):
                raise BenchError(f"outstanding sends not answered within {_SEND_WAIT_S:.0f} s")
        seconds = time.perf_counter() - start
    if problems:
        raise BenchError(problems[0])
    return acked[0], seconds
