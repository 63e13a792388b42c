"""A push consumer across a leader kill (SIGKILL) of a real 3-node cluster, under steady
produce load: no acknowledged message is lost (at-least-once), and the duplicates are
counted and bounded. Midway after the kill the push consumer is replaced by a new one of the
same group, so the committed offsets are read back from the new leader: the only duplicates
allowed are the messages the first one had pulled and not finished (its in-flight bound)."""

from __future__ import annotations

import functools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from raftlog.client import (
    Consumer,
    ConsumeResult,
    Message,
    OutgoingMessage,
    PushConsumer,
)
from raftlog.testing.local_cluster import LocalCluster
from tests.support.background_load import BackgroundLoad
from tests.support.topics import create_everywhere

pytestmark = pytest.mark.integration

TOPIC = "orders"
QUEUE_COUNT = 4
BATCHES = 100
BATCH_MESSAGES = 20
KILL_AFTER_MESSAGES = 600
SWITCH_AFTER_MESSAGES = 1200
# The first push consumer's bound on messages pulled and not finished: what its successor
# may see again.
MAX_PENDING_MESSAGES = 256
CONSUMED_WITHIN_S = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    running = LocalCluster(str(tmp_path / "data"), base_port=0, durability="write")
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


class Load(BackgroundLoad[bytes]):
    """Sends numbered batches, a little apart."""

    def __init__(self, cluster: LocalCluster) -> None:
        super().__init__(cluster, CONSUMED_WITHIN_S)

    def sends(self) -> Iterator[tuple[list[bytes], Callable[[], object]]]:
        for batch in range(BATCHES):
            bodies = [b"o%d-%d" % (batch, i) for i in range(BATCH_MESSAGES)]
            messages = [OutgoingMessage(b, queue_id=i % QUEUE_COUNT) for i, b in enumerate(bodies)]
            yield bodies, functools.partial(self.producer.send_batch, TOPIC, messages)
            time.sleep(0.01)


class Recorder:
    """The listener: counts each body, taking a little time so messages are in flight."""

    def __init__(self) -> None:
        self.seen: Counter[bytes] = Counter()
        self._lock = threading.Lock()
        self._chance = random.Random(18)

    def __call__(self, message: Message) -> ConsumeResult:
        with self._lock:
            pause_s = self._chance.random() * 0.01
        time.sleep(pause_s)
        with self._lock:
            self.seen[message.body] += 1
        return ConsumeResult.CONSUME_SUCCESS

    def wait_for(self, bodies: list[bytes]) -> None:
        deadline = time.monotonic() + CONSUMED_WITHIN_S
        while True:
            with self._lock:
                missing = [b for b in bodies if b not in self.seen]
            if not missing:
                return
            assert time.monotonic() < deadline, f"{len(missing)} messages never consumed"
            time.sleep(0.1)


def push_consumer(cluster: LocalCluster, recorder: Recorder) -> PushConsumer:
    return PushConsumer(
        cluster.addresses,
        group="billing",
        topic=TOPIC,
        listener=recorder,
        consume_thread_count=4,
        max_in_flight_per_queue=64,
        max_pending_messages=MAX_PENDING_MESSAGES,
        commit_interval_s=0.5,
    )


def test_no_message_is_lost_across_a_leader_kill(cluster: LocalCluster) -> None:
    create_everywhere(cluster.addresses, TOPIC, QUEUE_COUNT)
    recorder = Recorder()
    first = push_consumer(cluster, recorder).start()
    load = Load(cluster).start()
    load.wait_for(KILL_AFTER_MESSAGES)
    leader = cluster.leader_address(timeout_s=5.0)
    killed = next(n for n, node in cluster.nodes.items() if node.address == leader)
    cluster.kill(killed)
    load.wait_for(SWITCH_AFTER_MESSAGES)
    first.shutdown()
    seen_by_first = len(recorder.seen)
    # Its last commit is on the new leader: up to the lowest message it had not finished.
    with Consumer(cluster.addresses, "billing", TOPIC) as probe:
        committed = sum(probe.positions.values())
    assert seen_by_first - MAX_PENDING_MESSAGES <= committed <= seen_by_first
    with push_consumer(cluster, recorder):
        load.join()
        recorder.wait_for(load.acked)
    assert load.failed == []
    assert len(load.acked) >= SWITCH_AFTER_MESSAGES
    # At-least-once: every acknowledged message was consumed; nothing was made up.
    assert set(load.acked) <= set(recorder.seen)
    assert set(recorder.seen) <= set(load.acked) | set(load.unknown)
    duplicates = sum(count - 1 for count in recorder.seen.values())
    print(
        f"killed {killed}; {len(load.acked)} acknowledged, {len(load.unknown)} unknown; "
        f"{seen_by_first} consumed and {committed} committed before the switch; "
        f"{duplicates} duplicates"
    )
    assert duplicates <= MAX_PENDING_MESSAGES
