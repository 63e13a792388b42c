"""Issue 18's delay messages through the typed client against a real 3-node cluster: every
delayed message is delivered to its topic exactly once, never before it is due and within
about a second after, also when the leader is killed while messages are coming due (the
scheduler's progress rides in the same Raft entry as the copies it delivers).

The nodes run short delay levels (``--message-delay-level``) so the module stays short.
Lateness is measured against the send: a message's due time is the leader's clock when it
stored the message plus its delay, which lies between the send's start and its answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from raftlog.cli import main as cli_main
from raftlog.client import (
    Admin,
    Connection,
    Consumer,
    Message,
    Producer,
    RaftlogError,
)
from raftlog.testing.local_cluster import LocalCluster
from tests.support.topics import create_everywhere

pytestmark = pytest.mark.integration

LEVELS = "1s 2s 3s 4s"
LEVEL_MS = {1: 1000, 2: 2000, 3: 3000, 4: 4000}
# Delivered within this long after due (the scheduler turns every 50 ms; one Raft round).
LATE_BOUND_MS = 1000
# Across a leader kill the copies due meanwhile wait for the election and the new leader.
LATE_BOUND_ACROSS_KILL_MS = 3000
WAIT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("delay")
    running = LocalCluster(
        str(base / "data"),
        base_port=0,
        durability="write",
        extra_args=("--message-delay-level", LEVELS, "--timer-max-delay-ms", "60000"),
    )
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


@dataclass(frozen=True)
class Sent:
    """A delayed message: earliest and latest possible due time (client clock, ms)."""

    body: bytes
    due_from_ms: int
    due_to_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def send_delayed(producer: Producer, topic: str, body: bytes, level: int) -> Sent:
    started_ms = now_ms()
    producer.send(topic, body, delay_level=level)
    return Sent(body, started_ms + LEVEL_MS[level], now_ms() + LEVEL_MS[level])


def send_at(producer: Producer, topic: str, body: bytes, deliver_at_ms: int) -> Sent:
    """A message for ``deliver_at_ms``: due then, or when sent if that time has passed."""
    producer.send(topic, body, deliver_at_ms=deliver_at_ms)
    return Sent(body, deliver_at_ms, max(deliver_at_ms, now_ms()))


def consume_all(
    addresses: list[str], group: str, topic: str, count: int, timeout_s: float = WAIT_S
) -> list[Message]:
    """Read ``topic`` as ``group`` until ``count`` messages came and one more second passed
    quietly (a duplicate would show), or the timeout."""
    received: list[Message] = []
    deadline = time.monotonic() + timeout_s
    with Consumer(addresses, group, topic, from_beginning=True) as consumer:
        while time.monotonic() < deadline:
            batch = consumer.poll(0.2)
            received += batch
            if len(received) >= count and not batch:
                quiet_until = time.monotonic() + 1.0
                while time.monotonic() < quiet_until:
                    received += consumer.poll(0.2)
                break
    return received


def check_deliveries(sent: list[Sent], received: list[Message], late_bound_ms: int) -> list[int]:
    """Each sent message delivered once, not before due; returns each one's lateness bound
    (store time of the copy minus the earliest due time, ms)."""
    by_body = {s.body: s for s in sent}
    bodies = [m.body for m in received]
    assert sorted(bodies) == sorted(by_body), "lost or duplicated delayed messages"
    lateness = []
    for message in received:
        expected = by_body[message.body]
        # Not before due: the copy is stored once the scheduler saw it due.
        assert message.store_timestamp_ms >= expected.due_from_ms, message
        late_ms = message.store_timestamp_ms - expected.due_to_ms
        assert late_ms <= late_bound_ms, (late_ms, message)
        lateness.append(message.store_timestamp_ms - expected.due_from_ms)
        assert not any(name in ("REAL_TOPIC", "TIMER_DELIVER_MS") for name, _ in message.properties)
    return lateness


class Load:
    """Plain messages produced as fast as one async producer goes, on a thread, so the
    scheduler delivers under load."""

    def __init__(self, connection: Connection, topic: str) -> None:
        create_everywhere(connection, topic, 2)
        self._producer = Producer(connection)
        self._topic = topic
        self._stop = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            futures = [self._producer.send_async(self._topic, b"x" * 256) for _ in range(200)]
            for future in futures:
                future.result(timeout=30)
            self.sent += len(futures)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.close()


def test_delay_levels_deliver_once_after_due_under_load(cluster: LocalCluster) -> None:
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, "delay-levels", 2)
        load = Load(connection, "delay-load")
        try:
            sent = []
            for i in range(60):
                sent.append(send_delayed(producer, "delay-levels", f"m{i}".encode(), 1 + i % 3))
                time.sleep(0.02)
            received = consume_all(cluster.addresses, "g-levels", "delay-levels", len(sent))
        finally:
            load.stop()
    lateness = sorted(check_deliveries(sent, received, LATE_BOUND_MS))
    print(
        f"delay levels under load ({load.sent} plain messages meanwhile): lateness "
        f"median {lateness[len(lateness) // 2]} ms, max {lateness[-1]} ms"
    )


def test_delay_rewrite_keeps_the_message(cluster: LocalCluster) -> None:
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, "delay-fields", 1)
        producer.send(
            "delay-fields",
            b"body",
            keys=("k1",),
            tags="TagA",
            properties={"app": "x"},
            uniq_key="U1",
            delay_level=1,
        )
        [message] = consume_all(cluster.addresses, "g-fields", "delay-fields", 1)
    assert (message.topic, message.queue_id, message.body) == ("delay-fields", 0, b"body")
    assert (message.keys, message.tags, message.uniq_key) == (("k1",), "TagA", "U1")
    assert ("app", "x") in message.properties
    assert message.reconsume_times == 0


def test_delivery_times_deliver_by_time_not_arrival(cluster: LocalCluster) -> None:
    topic = "deliver-at"
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, topic, 2)
        start_ms = now_ms()
        # Later times first: the timer queue is in arrival order, delivery in time order.
        sent = [
            send_at(producer, topic, f"t{i}".encode(), start_ms + 3000 - 60 * i) for i in range(40)
        ]
        past = [send_at(producer, topic, f"p{i}".encode(), start_ms - 1000) for i in range(3)]
        received = consume_all(cluster.addresses, "g-at", topic, len(sent) + len(past))
    check_deliveries(past, [m for m in received if m.body.startswith(b"p")], LATE_BOUND_MS)
    lateness = sorted(
        check_deliveries(sent, [m for m in received if m.body.startswith(b"t")], LATE_BOUND_MS)
    )
    delayed = [m for m in received if m.body.startswith(b"t")]
    # Each queue's copies are stored in delivery-time order.
    for queue_id in {m.queue_id for m in delayed}:
        in_queue = [m for m in delayed if m.queue_id == queue_id]
        assert in_queue == sorted(in_queue, key=lambda m: int(m.body[1:]), reverse=True)
    print(f"deliver_at_ms: lateness median {lateness[len(lateness) // 2]} ms, max {lateness[-1]}")


def test_bad_delays_are_refused(cluster: LocalCluster) -> None:
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, "delay-bad", 1)
        with pytest.raises(RaftlogError, match=r"delay_level 5 is outside 1\.\.4"):
            producer.send("delay-bad", b"x", delay_level=5)
        with pytest.raises(RaftlogError, match="timer_max_delay_ms = 60000"):
            producer.send("delay-bad", b"x", deliver_at_ms=now_ms() + 120_000)
        with pytest.raises(RaftlogError, match="written only by the node"):
            producer.send("SCHEDULE_TOPIC_XXXX", b"x")
        with pytest.raises(ValueError, match="at most one"):
            producer.send("delay-bad", b"x", delay_level=1, deliver_at_ms=now_ms())


def test_delayed_messages_survive_a_leader_kill(cluster: LocalCluster) -> None:
    """Messages due over several seconds; the leader is killed while they come due. Every one
    is delivered exactly once, none before due."""
    topic = "delay-kill"
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, topic, 2)
        started = time.monotonic()
        # Due one every 25 ms from 1 s after the start, and delivery times from 1.5 s to
        # 3.5 s after it (latest sent first); the kill lands in the middle.
        sent = [
            send_at(producer, topic, f"a{i}".encode(), now_ms() + 3500 - 50 * i) for i in range(40)
        ]
        for i in range(80):
            sent.append(send_delayed(producer, topic, f"k{i}".encode(), 1))
            time.sleep(0.025)
        with Admin(connection) as admin:
            leader_id = admin.cluster_status().leader_id
    time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
    cluster.kill(leader_id)
    survivors = [n.address for n in cluster.nodes.values() if n.node_id != leader_id]
    try:
        received = consume_all(survivors, "g-kill", topic, len(sent))
    finally:
        cluster.restart(leader_id)
    lateness = check_deliveries(sent, received, LATE_BOUND_ACROSS_KILL_MS)
    print(f"across a leader kill: lateness max {max(lateness)} ms")


def test_the_cli_sends_delayed_messages(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = ["--servers", ",".join(cluster.addresses)]
    with Connection(cluster.addresses) as connection:
        create_everywhere(connection, "delay-cli", 1)
    started_ms = now_ms()
    assert cli_main(["produce", "delay-cli", "later", "--delay-level", "1", *servers]) == 0
    assert "sent" in capsys.readouterr().out
    both = ["--delay-level", "1", "--deliver-at-ms", "5"]
    assert cli_main(["produce", "delay-cli", "x", *both, *servers]) == 2
    assert cli_main(["produce", "delay-cli", "x", "--delay-level", "9", *servers]) == 1
    [message] = consume_all(cluster.addresses, "g-cli", "delay-cli", 1)
    assert message.body == b"later"
    assert message.store_timestamp_ms >= started_ms + LEVEL_MS[1]
