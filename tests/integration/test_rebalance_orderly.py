"""Issue 18's clustering and orderly consumption through the typed client against a real
3-node cluster: the members of a group split a topic's queues and together read every
message once; a member that leaves, or stops sending heartbeats, has its queues moved to the
others; and orderly consumers of messages sent by sharding key deliver each key's messages
in order across a leader kill (SIGKILL), with the duplicates counted and bounded."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from raftlog.client import (
    Connection,
    Consumer,
    ConsumeResult,
    Message,
    OutgoingMessage,
    Producer,
    PushConsumer,
    RaftlogError,
)
from raftlog.testing.local_cluster import LocalCluster
from tests.support.background_load import BackgroundLoad
from tests.support.topics import create_everywhere

pytestmark = pytest.mark.integration

HEARTBEAT_S = 0.3
LOCK_LEASE_MS = 2000
WAIT_S = 30.0
QUEUE_COUNT = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base: Path = tmp_path_factory.mktemp("rebalance-orderly")
    running = LocalCluster(
        str(base / "data"),
        base_port=0,
        durability="write",
        extra_args=("--consumer-lock-lease-ms", str(LOCK_LEASE_MS)),
    )
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def connection(cluster: LocalCluster) -> Iterator[Connection]:
    with Connection(cluster.addresses) as shared:
        yield shared


def member(connection: Connection, group: str, topic: str, client_id: str) -> Consumer:
    return Consumer(connection, group, topic, client_id=client_id, heartbeat_interval_s=HEARTBEAT_S)


def settle(consumers: Sequence[Consumer], sizes: Sequence[int], seen: Counter[bytes]) -> None:
    """Poll until the consumers read disjoint queues, together all of them, ``sizes`` each
    (what they read meanwhile is counted in ``seen``)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        for consumer in consumers:
            seen.update(m.body for m in consumer.poll(0.05))
        owned = [set(c.positions) for c in consumers]
        union = set().union(*owned)
        if [len(o) for o in owned] == list(sizes) and union == set(range(QUEUE_COUNT)):
            return
        assert time.monotonic() < deadline, f"never split {sizes}: {owned}"


def read_all(consumers: Sequence[Consumer], bodies: list[bytes], seen: Counter[bytes]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not set(bodies) <= set(seen):
        assert time.monotonic() < deadline, f"{len(set(bodies) - set(seen))} never read"
        for consumer in consumers:
            seen.update(m.body for m in consumer.poll(0.05))


def produce(connection: Connection, topic: str, count: int, first: int) -> list[bytes]:
    bodies = [b"%s-%d" % (topic.encode(), i) for i in range(first, first + count)]
    with Producer(connection) as producer:
        producer.send_batch(
            topic, [OutgoingMessage(b, queue_id=i % QUEUE_COUNT) for i, b in enumerate(bodies)]
        )
    return bodies


def test_members_split_the_queues_and_take_over_from_one_that_goes(
    cluster: LocalCluster, connection: Connection
) -> None:
    topic = "shared"
    create_everywhere(cluster.addresses, topic, QUEUE_COUNT)
    m1, m2, m3 = (member(connection, "split", topic, f"m{i}") for i in (1, 2, 3))
    seen: Counter[bytes] = Counter()
    try:
        settle([m1, m2, m3], [2, 2, 2], seen)
        # "average" over the sorted member ids: contiguous blocks.
        assert [sorted(c.positions) for c in (m1, m2, m3)] == [[0, 1], [2, 3], [4, 5]]
        first = produce(connection, topic, 300, 0)
        read_all([m1, m2, m3], first, seen)
        assert set(seen) == set(first) and max(seen.values()) == 1
        # m3 leaves (committing first): m1 and m2 take its queues at their next heartbeat.
        m3.commit()
        m3.close()
        settle([m1, m2], [3, 3], seen)
        second = produce(connection, topic, 300, 300)
        read_all([m1, m2], second, seen)
        # m2 stops (a crash after its commit): no leave, its heartbeats just end. Three
        # missed ones later the leader drops it, and m1 reads everything.
        m2.commit()
        started = time.monotonic()
        settle([m1], [6], seen)
        took_s = time.monotonic() - started
        third = produce(connection, topic, 120, 600)
        read_all([m1], third, seen)
    finally:
        for consumer in (m1, m2, m3):
            consumer.close()
    # Every message once: each queue moved with its offset committed.
    assert set(seen) == set(first + second + third)
    assert max(seen.values()) == 1, [b for b, n in seen.items() if n > 1][:5]
    assert took_s < 3 * HEARTBEAT_S + 2.0


def test_push_consumers_hand_queues_over_while_messages_are_in_flight(
    cluster: LocalCluster, connection: Connection
) -> None:
    topic = "pushed-shared"
    create_everywhere(cluster.addresses, topic, QUEUE_COUNT)
    bodies = produce(connection, topic, 600, 0)
    seen: Counter[bytes] = Counter()

    def listener(message: Message) -> ConsumeResult:
        time.sleep(0.002)  # keep messages in flight when the queues move
        with LOCK:
            seen[message.body] += 1
        return ConsumeResult.CONSUME_SUCCESS

    def push(client_id: str) -> PushConsumer:
        return PushConsumer(
            connection,
            group="pushers",
            topic=topic,
            listener=listener,
            client_id=client_id,
            heartbeat_interval_s=HEARTBEAT_S,
            consume_thread_count=4,
            pull_batch_size=16,
            max_pending_messages=64,
        )

    with push("q1"):
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 100:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with push("q2") as second:
            # q2 takes its half two heartbeats after it joined; q1 may have finished the
            # first batch by then, so a second batch is consumed by both.
            while len(second.consumer.positions) != QUEUE_COUNT // 2:
                assert time.monotonic() < deadline, "q2 never got its half of the queues"
                time.sleep(0.05)
            bodies += produce(connection, topic, 600, 600)
            while len(seen) < len(bodies):
                assert time.monotonic() < deadline, f"only {len(seen)} consumed"
                time.sleep(0.05)
    assert set(seen) == set(bodies)
    duplicates = sum(n - 1 for n in seen.values())
    print(f"push hand-over: {duplicates} duplicates")
    # q1 gives the moved queues up at its next heartbeat, committing where it stopped, and q2
    # starts them two heartbeats after it joined, from that commit: no message is read twice
    # unless q1's heartbeat comes later than that. Before a poll kept to its deadline (a sweep
    # of idle queues long-polled a slice each, past it and past the heartbeats), q1 was late
    # in most runs: about 300 duplicates, and 600 when q1 dropped off the group's list
    # altogether. Measured now: 0 in 10 runs.
    # The bound allows what q1 had pulled and not finished (max_pending_messages).
    assert duplicates <= 64


# ---------------------------------------------------------------------- orderly

KEYS = [f"order-{k}" for k in range(8)]
SEQUENCES = 60
ORDERLY_QUEUES = 4
PULL_BATCH = 16


class KeyedLoad(BackgroundLoad[tuple[str, int]]):
    """Sends ``SEQUENCES`` messages per key by sharding key, in order."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        super().__init__(cluster, WAIT_S, "keyed-load")
        self._topic = topic
        self.start()

    def sends(self) -> Iterator[tuple[list[tuple[str, int]], Callable[[], object]]]:
        for seq in range(SEQUENCES):
            for key in KEYS:
                body = f"{key}:{seq}".encode()
                send = functools.partial(self.producer.send, self._topic, body, sharding_key=key)
                yield [(key, seq)], send
            time.sleep(0.005)


class OrderlyReader:
    """One orderly member on its own thread: polls, records each delivery in the shared
    ``deliveries`` (in delivery order across members), then commits."""

    def __init__(
        self, cluster: LocalCluster, topic: str, client_id: str, deliveries: list[tuple[str, int]]
    ) -> None:
        self._consumer = Consumer(
            cluster.addresses,
            "orderly",
            topic,
            orderly=True,
            client_id=client_id,
            heartbeat_interval_s=HEARTBEAT_S,
            max_messages=PULL_BATCH,
            timeout_s=10.0,
        )
        self._deliveries = deliveries
        self._stop = threading.Event()
        self.errors: list[str] = []
        self.delivered = 0
        self._thread = threading.Thread(target=self._run, name=f"orderly-{client_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = self._consumer.poll(0.2)
            except RaftlogError as error:
                self.errors.append(str(error))
                time.sleep(0.2)
                continue
            for message in messages:
                key, _, seq = message.body.decode().rpartition(":")
                with LOCK:
                    self._deliveries.append((key, int(seq)))
            self.delivered += len(messages)
            if messages:
                try:
                    self._consumer.commit()
                except RaftlogError as error:
                    self.errors.append(str(error))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self._consumer.close()


LOCK = threading.Lock()


def first_deliveries_out_of_order(
    deliveries: list[tuple[str, int]], acked: set[tuple[str, int]]
) -> list[str]:
    """Each delivery of (key, seq) must come after the first delivery of every acknowledged
    earlier seq of that key; returns the violations."""
    first: dict[tuple[str, int], int] = {}
    for index, delivery in enumerate(deliveries):
        first.setdefault(delivery, index)
    problems: list[str] = []
    for index, (key, seq) in enumerate(deliveries):
        for earlier in range(seq):
            if (key, earlier) in acked and first.get((key, earlier), index + 1) > index:
                problems.append(f"{key}:{seq} delivered (#{index}) before {key}:{earlier}")
                break
    return problems


def test_orderly_consumers_keep_each_keys_order_across_a_leader_kill(
    cluster: LocalCluster,
) -> None:
    topic = "orderly"
    create_everywhere(cluster.addresses, topic, ORDERLY_QUEUES)
    deliveries: list[tuple[str, int]] = []
    readers = [OrderlyReader(cluster, topic, f"r{i}", deliveries) for i in (1, 2)]
    load = KeyedLoad(cluster, topic)
    killed = ""
    try:
        load.wait_for(len(KEYS) * SEQUENCES // 3)
        leader = cluster.leader_address(timeout_s=5.0)
        killed = next(n for n, node in cluster.nodes.items() if node.address == leader)
        cluster.kill(killed)
        load.join()
        deadline = time.monotonic() + WAIT_S
        while not set(load.acked) <= set(deliveries):
            assert time.monotonic() < deadline, f"{len(set(load.acked) - set(deliveries))} unread"
            time.sleep(0.1)
    finally:
        for reader in readers:
            reader.stop()
        if killed:
            cluster.start_node(killed)
    assert load.failed == []
    assert set(deliveries) <= set(load.acked) | set(load.unknown)  # nothing made up
    assert first_deliveries_out_of_order(deliveries, set(load.acked)) == []
    duplicates = len(deliveries) - len(set(deliveries))
    print(
        f"killed {killed}; {len(load.acked)} acknowledged, {len(load.unknown)} unknown; "
        f"{len(deliveries)} deliveries ({[r.delivered for r in readers]} by reader), "
        f"{duplicates} duplicates; reader errors {[len(r.errors) for r in readers]}"
    )
    assert all(r.delivered for r in readers)  # both held queues
    # A queue's messages come again only from its last commit: at most a batch per queue
    # for each handover the failover caused (lapsed locks, one per queue and reader).
    assert duplicates <= 2 * ORDERLY_QUEUES * PULL_BATCH


PUSH_SEQUENCES = 25


class SuspendingListener:
    """Orderly listener: records what it accepts; answers SUSPEND_CURRENT_QUEUE_A_MOMENT
    the first time it sees a seq that is 3 mod 7, and notes who is running each queue."""

    def __init__(self, accepted: list[tuple[str, int]]) -> None:
        self.accepted = accepted
        self.suspended: list[tuple[str, int]] = []
        self.overlaps = 0
        self._running: Counter[int] = Counter()

    def __call__(self, message: Message) -> ConsumeResult:
        key, _, seq_text = message.body.decode().rpartition(":")
        delivery = (key, int(seq_text))
        with LOCK:
            self._running[message.queue_id] += 1
            self.overlaps += self._running[message.queue_id] > 1
        time.sleep(0.002)
        with LOCK:
            self._running[message.queue_id] -= 1
            if delivery[1] % 7 == 3 and delivery not in self.suspended:
                self.suspended.append(delivery)
                return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
            self.accepted.append(delivery)
        return ConsumeResult.CONSUME_SUCCESS


def test_orderly_push_consumers_suspend_in_place_and_hand_queues_over(
    cluster: LocalCluster, connection: Connection
) -> None:
    topic = "orderly-push"
    create_everywhere(cluster.addresses, topic, ORDERLY_QUEUES)
    sent = [(key, seq) for seq in range(PUSH_SEQUENCES) for key in KEYS]
    with Producer(connection) as producer:
        producer.send_batch(
            topic,
            [OutgoingMessage(f"{k}:{s}".encode(), sharding_key=k) for k, s in sent],
        )
    accepted: list[tuple[str, int]] = []
    listener = SuspendingListener(accepted)

    def push(client_id: str) -> PushConsumer:
        return PushConsumer(
            connection,
            group="orderly-push",
            topic=topic,
            listener=listener,
            orderly=True,
            client_id=client_id,
            heartbeat_interval_s=HEARTBEAT_S,
            suspend_s=0.1,
            consume_thread_count=4,
        )

    first, second = push("p1").start(), push("p2").start()
    try:
        deadline = time.monotonic() + WAIT_S
        while len(set(accepted)) < len(sent) // 2:
            assert time.monotonic() < deadline, f"only {len(set(accepted))} consumed"
            time.sleep(0.05)
        second.shutdown()  # commits what it finished; its queues move to p1
        while len(set(accepted)) < len(sent):
            assert time.monotonic() < deadline, f"only {len(set(accepted))} consumed"
            time.sleep(0.05)
    finally:
        second.shutdown()
        first.shutdown()
    assert set(accepted) == set(sent)
    assert first_deliveries_out_of_order(accepted, set(sent)) == []
    # Each suspended message came again, and was accepted, before its key went on.
    assert len(listener.suspended) == len(KEYS) * len(range(3, PUSH_SEQUENCES, 7))
    assert listener.overlaps == 0
    duplicates = len(accepted) - len(set(accepted))
    print(f"orderly push: {len(accepted)} accepted, {duplicates} duplicates")
    assert duplicates <= ORDERLY_QUEUES


def cli(*argv: str, stdin: str | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "raftlog.cli", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    return done.returncode, done.stdout


def test_the_cli_sends_by_sharding_key_and_consumes_orderly(cluster: LocalCluster) -> None:
    servers = ",".join(cluster.addresses)
    create_everywhere(cluster.addresses, "cli-orderly", ORDERLY_QUEUES)
    events = "created\npaid\nshipped\n"
    code, out = cli(
        "produce", "cli-orderly", "--sharding-key", "order-17", "--servers", servers, stdin=events
    )
    assert code == 0
    assert len({line.split()[1] for line in out.splitlines()}) == 1  # one queue: "sent q2 @0"
    code, out = cli(
        "consume",
        "cli-orderly",
        "--group",
        "cli",
        "--orderly",
        "--timeout",
        "5",
        "--max",
        "3",
        "--servers",
        servers,
    )
    assert code == 0
    assert [line.rsplit(" ", 1)[1] for line in out.splitlines()] == ["created", "paid", "shipped"]


def test_members_and_messages_are_checked(connection: Connection) -> None:
    with pytest.raises(ValueError, match="no queue_ids"):
        Consumer(connection, "g", "t", [0], orderly=True)
    with pytest.raises(ValueError, match="allocation"):
        Consumer(connection, "g", "t", allocation="random")
    with pytest.raises(ValueError, match="client_id"):
        Consumer(connection, "g", "t", client_id="two words")
