"""The NATS JetStream side of the side-by-side bench, through nats-py (asyncio): stream set-up,
async publish with a window of outstanding acks, synchronous publish latency, pull-consumer
fetch, and failover (SIGKILL the stream leader under load, time to the first acknowledged
publish sent after the kill).

Rules this module keeps:
- nats-py is imported here only (an optional ``bench`` dependency); the rest of raftlog never
  needs it.
- Streams have 3 replicas and file storage; clients connect to the stream leader (the best
  case for NATS, as docs/PERFORMANCE.md advises), except in failover, where the client is
  connected to the two servers that survive, so the figure is the servers' failover and not
  the client's reconnect back-off.
- The pull consumer has ``ack_policy: none``: raftlog's pull does not acknowledge per message
  either (a consumer group commits an offset), so neither side pays a per-message ack.
- During failover, publishes fail at once with "no responders" (or time out) until a new
  leader is elected: the producer retries every ``RETRY_INTERVAL_S``.
- Every loop is bounded by a count and a time budget; every wait has a time limit.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

from raftlog.bench.nats_cluster import SERVER_NAMES, NatsCluster
from raftlog.bench.report import Budget

STREAM_READY_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 10.0
# One publish's wait during failover: short, so a publish stuck on the dead leader is retried.
FAILOVER_PUBLISH_TIMEOUT_S = 0.5
RETRY_INTERVAL_S = 0.01
LOAD_BEFORE_KILL_S = 0.5
FAILOVER_TIMEOUT_S = 30.0
RECOVERY_TIMEOUT_S = 60.0
FETCH_TIMEOUT_S = 5.0


class NatsBenchError(RuntimeError):
    """A publish or fetch failed, or a wait ran out of time."""


def stream_name(body_bytes: int) -> str:
    return f"BENCH{body_bytes}"


def subject(body_bytes: int) -> str:
    return f"bench.{body_bytes}"


async def _connect(urls: Sequence[str], **options: Any) -> Any:
    import nats

    return await nats.connect(
        servers=list(urls), connect_timeout=REQUEST_TIMEOUT_S, dont_randomize=True, **options
    )


async def _retry(call: Any, what: str, timeout_s: float) -> Any:
    """Await ``call()`` until it succeeds (the meta or stream leader may be electing)."""
    import nats.errors

    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    for _ in range(int(timeout_s / 0.1) + 1):
        try:
            return await call()
        except (TimeoutError, nats.errors.Error) as error:
            last = error
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.1)
    raise NatsBenchError(f"{what} did not succeed within {timeout_s} s: {last!r}")


async def create_streams(urls: Sequence[str], body_sizes: Sequence[int]) -> None:
    """One stream per body size: 3 replicas, file storage."""
    from nats.js.api import StorageType, StreamConfig

    nc = await _connect(urls)
    try:
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        for body_bytes in body_sizes:
            config = StreamConfig(
                name=stream_name(body_bytes),
                subjects=[subject(body_bytes)],
                num_replicas=3,
                storage=StorageType.FILE,
            )
            await _retry(lambda c=config: js.add_stream(c), "add_stream", STREAM_READY_TIMEOUT_S)
    finally:
        await nc.close()


async def _stream_info(urls: Sequence[str], stream: str) -> Any:
    nc = await _connect(urls)
    try:
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        return await _retry(lambda: js.stream_info(stream), "stream_info", STREAM_READY_TIMEOUT_S)
    finally:
        await nc.close()


async def stream_leader(cluster: NatsCluster, stream: str, timeout_s: float) -> str:
    """The server name leading ``stream`` once every replica is current (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.1) + 1):
        live = [cluster.url(name) for name in SERVER_NAMES if cluster.pid(name) is not None]
        info = await _stream_info(live, stream)
        replicas = (info.cluster.replicas or []) if info.cluster is not None else []
        if (
            info.cluster is not None
            and info.cluster.leader in SERVER_NAMES
            and len(replicas) == len(SERVER_NAMES) - 1
            and all(replica.current for replica in replicas)
        ):
            return str(info.cluster.leader)
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.1)
    raise NatsBenchError(f"{stream} has no leader with current replicas after {timeout_s} s")


async def stored_messages(cluster: NatsCluster, body_bytes: int) -> int:
    info = await _stream_info(cluster.urls, stream_name(body_bytes))
    return int(info.state.messages)


async def produce_window(
    url: str, body_bytes: int, window: int, budget: Budget
) -> tuple[int, float]:
    """``publish_async`` with at most ``window`` acks outstanding until the budget is spent;
    (messages acknowledged, seconds from the first publish to the last ack)."""
    nc = await _connect([url])
    try:
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S, publish_async_max_pending=window)
        body = b"x" * body_bytes
        target = subject(body_bytes)
        acked = [0]
        failures: list[BaseException] = []

        def answered(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                failures.append(NatsBenchError("a publish was cancelled"))
            elif future.exception() is not None:
                failures.append(future.exception() or NatsBenchError("publish failed"))
            else:
                acked[0] += 1

        async def publish_all() -> None:
            sent = 0
            deadline = time.perf_counter() + budget.max_seconds
            while sent < budget.max_count and time.perf_counter() < deadline:
                # No wait_stall: it wraps every acquire in asyncio.wait_for, a task per
                # publish, which cost nats-py more than half its throughput. The whole loop
                # is bounded in time instead (below).
                future = await js.publish_async(target, body)
                future.add_done_callback(answered)
                sent += 1
                if failures:
                    raise NatsBenchError(f"publish failed: {failures[0]!r}")
            await js.publish_async_completed()

        start = time.perf_counter()
        limit_s = budget.max_seconds + REQUEST_TIMEOUT_S
        try:
            await asyncio.wait_for(publish_all(), limit_s)
        except TimeoutError:
            raise NatsBenchError(f"acks still outstanding after {limit_s} s") from None
        seconds = time.perf_counter() - start
        if failures:
            raise NatsBenchError(f"publish failed: {failures[0]!r}")
        return acked[0], seconds
    finally:
        await nc.close()


async def publish_latencies(url: str, body_bytes: int, budget: Budget) -> tuple[list[float], float]:
    """Synchronous ``publish`` one at a time; (each publish's seconds, sorted; total)."""
    nc = await _connect([url])
    try:
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        body = b"x" * body_bytes
        target = subject(body_bytes)
        samples_s: list[float] = []
        start = time.perf_counter()
        deadline = start + budget.max_seconds
        while len(samples_s) < budget.max_count and time.perf_counter() < deadline:
            began = time.perf_counter()
            await js.publish(target, body)
            samples_s.append(time.perf_counter() - began)
        return sorted(samples_s), time.perf_counter() - start
    finally:
        await nc.close()


async def consume(
    url: str, body_bytes: int, total: int, fetch_batch: int, budget: Budget
) -> tuple[int, float]:
    """Read the stream from its start with a fresh pull consumer, ``fetch(fetch_batch)`` at a
    time, until ``total`` messages or the budget; (messages read, seconds)."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await _connect([url])
    try:
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        pull = await js.pull_subscribe(
            subject(body_bytes),
            durable=f"bench-{uuid.uuid4().hex[:12]}",
            stream=stream_name(body_bytes),
            config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
        )
        limit = min(total, budget.max_count)
        read = 0
        start = time.perf_counter()
        deadline = start + budget.max_seconds
        while read < limit and time.perf_counter() < deadline:
            messages = await pull.fetch(min(fetch_batch, limit - read), timeout=FETCH_TIMEOUT_S)
            read += len(messages)
        return read, time.perf_counter() - start
    finally:
        await nc.close()


async def failover(cluster: NatsCluster, body_bytes: int) -> float:
    """Kill the stream leader (SIGKILL) while a producer publishes; seconds from the kill to
    the first ack of a publish sent after it. Restarts the killed server and waits until its
    replica is current again before returning."""
    import nats.errors

    stream = stream_name(body_bytes)
    leader = await stream_leader(cluster, stream, RECOVERY_TIMEOUT_S)
    survivors = [cluster.url(name) for name in SERVER_NAMES if name != leader]
    nc = await _connect(survivors, reconnect_time_wait=0.05, max_reconnect_attempts=-1)
    killed_at: list[float] = []
    first_ack_s: list[float] = []
    try:
        js = nc.jetstream(timeout=FAILOVER_PUBLISH_TIMEOUT_S)
        body = b"x" * body_bytes
        target = subject(body_bytes)

        async def produce() -> None:
            deadline = time.monotonic() + LOAD_BEFORE_KILL_S + FAILOVER_TIMEOUT_S
            while time.monotonic() < deadline:
                invoked = time.monotonic()
                try:
                    await js.publish(target, body, timeout=FAILOVER_PUBLISH_TIMEOUT_S)
                except (TimeoutError, nats.errors.Error):
                    await asyncio.sleep(RETRY_INTERVAL_S)
                    continue
                if killed_at and invoked >= killed_at[0]:
                    first_ack_s.append(time.monotonic() - killed_at[0])
                    return

        producer = asyncio.create_task(produce())
        await asyncio.sleep(LOAD_BEFORE_KILL_S)
        killed_at.append(time.monotonic())
        cluster.kill(leader)
        await asyncio.wait_for(producer, LOAD_BEFORE_KILL_S + FAILOVER_TIMEOUT_S + 1.0)
    finally:
        await nc.close()
    cluster.restart(leader)
    await stream_leader(cluster, stream, RECOVERY_TIMEOUT_S)
    if not first_ack_s:
        raise NatsBenchError(f"no publish acknowledged within {FAILOVER_TIMEOUT_S} s of the kill")
    return first_ack_s[0]
