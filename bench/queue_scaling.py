"""raftlog's queue-scaling figure for the side-by-side bench: produce throughput when the same
load is spread over 1, 1,000 or 10,000 queues, on one local 3-node cluster.

Queues are spread over topics of at most ``QUEUES_PER_TOPIC`` queues each (10,000 queues are
1,000 topics of 10), as a real deployment spreads them. A ProduceRequest carries one topic,
so the pre-built requests cycle through the topics and each request's messages go round robin
over its topic's queues: every queue receives writes during a measurement.

Rules this module keeps:
- Every queue gets one message before anything is timed (its ConsumeQueue file exists), so
  the figures compare steady states, as the store bench does.
- The queue counts are measured interleaved (1, 1,000, 10,000, 1, ...) ``rounds`` times on
  the same cluster, so a noisy neighbour hits them alike; the caller takes medians.
- Every loop is bounded (``produce_windowed`` with a ``Budget``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from raftlog.bench.cluster import (
    REQUEST_POOL_SIZE,
    BenchError,
    build_request,
    produce_windowed,
)
from raftlog.bench.report import Budget
from raftlog.client.admin import Admin

QUEUES_PER_TOPIC = 10
# Warm-up requests in flight: enough to create thousands of topics' first files quickly.
WARM_UP_WINDOW = 16


def topics_for(queue_count: int) -> list[tuple[str, int]]:
    """(topic name, its queue count) for ``queue_count`` queues in all."""
    per_topic = min(queue_count, QUEUES_PER_TOPIC)
    topic_count = math.ceil(queue_count / per_topic)
    return [
        (f"q{queue_count}-t{i}", min(per_topic, queue_count - i * per_topic))
        for i in range(topic_count)
    ]


def create_topics(admin: Admin, queue_count: int) -> None:
    for topic, queues in topics_for(queue_count):
        admin.create_topic(topic, queues)


def _requests(queue_count: int, body_bytes: int, batch_size: int) -> list[Any]:
    topics = topics_for(queue_count)
    size = max(len(topics), REQUEST_POOL_SIZE)
    return [
        build_request(
            topics[i % len(topics)][0], body_bytes, batch_size, i, topics[i % len(topics)][1]
        )
        for i in range(size)
    ]


def warm_up(stub: Any, queue_count: int, max_seconds: float) -> None:
    """One message to every queue (one request per topic, one message per queue)."""
    requests = [
        build_request(topic, 1, queues, 0, queues) for topic, queues in topics_for(queue_count)
    ]
    # Counted per request (batch_size 1 here), so the count bound is "every request once".
    sent, _ = produce_windowed(
        stub, requests, 1, WARM_UP_WINDOW, Budget(len(requests), max_seconds)
    )
    if sent < len(requests):
        raise BenchError(f"warm-up reached {sent} of {len(requests)} topics within {max_seconds} s")


def measure(
    stub: Any,
    queue_counts: Sequence[int],
    body_bytes: int,
    batch_size: int,
    window: int,
    budget: Budget,
    rounds: int,
    record: Callable[[int, int, float], None],
) -> None:
    """Interleaved rounds; ``record(round, queue_count, msgs_per_s)`` per measurement."""
    pools = {n: _requests(n, body_bytes, batch_size) for n in queue_counts}
    for round_index in range(rounds):
        for queue_count in queue_counts:
            messages, seconds = produce_windowed(
                stub, pools[queue_count], batch_size, window, budget
            )
            record(round_index, queue_count, messages / seconds if seconds > 0 else 0.0)
