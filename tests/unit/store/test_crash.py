"""A real crash test: a child process writes under SYNC_FLUSH and is killed with SIGKILL at
several points; the parent then recovers the store and checks that every acknowledged write is
intact, nothing partial is readable, and the ConsumeQueues and IndexFiles agree with the
CommitLog."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from raftlog.store.message_store import Message, MessageStore
from raftlog.store.record import read_dispatch_info
from tests.unit.store.crash_writer import QUEUE_COUNT, TOPICS, crash_config, expected_body

REPO_ROOT = Path(__file__).resolve().parents[3]
WRITER = Path(__file__).with_name("crash_writer.py")


@dataclass(frozen=True)
class Ack:
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    msg_id: str
    key: str
    body_len: int


@dataclass(frozen=True)
class KillPoint:
    """When to SIGKILL a writer: after ``after_acks`` acknowledgements, or ``after_s`` seconds
    after it is ready to write, or (``during_open``) ``after_s`` seconds after it was started,
    which may land while it recovers the previous crash."""

    after_acks: int | None = None
    after_s: float | None = None
    during_open: bool = False


def run_and_kill(root: str, run_id: str, seed: int, kill: KillPoint) -> list[Ack]:
    """Start a writer and SIGKILL it at ``kill``; return every ack it printed (lines read
    after the kill count too: the child finished those writes)."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    child = subprocess.Popen(
        [sys.executable, str(WRITER), root, run_id, str(seed)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    acks: list[Ack] = []
    timer = None
    if kill.after_s is not None and kill.during_open:
        timer = threading.Timer(kill.after_s, child.send_signal, (signal.SIGKILL,))
        timer.start()
    try:
        if child.stdout.readline().strip() != "READY":
            assert kill.during_open, "the writer died before it was ready"
            return acks
        if kill.after_s is not None and not kill.during_open:
            timer = threading.Timer(kill.after_s, child.send_signal, (signal.SIGKILL,))
            timer.start()
        for line in child.stdout:
            if not line.endswith("\n"):
                break  # cut mid-line by the kill: not an ack the child finished printing
            _, topic, queue_id, queue_offset, physical_offset, msg_id, key, body_len = line.split()
            acks.append(
                Ack(
                    topic,
                    int(queue_id),
                    int(queue_offset),
                    int(physical_offset),
                    msg_id,
                    key,
                    int(body_len),
                )
            )
            if kill.after_acks is not None and len(acks) == kill.after_acks:
                child.send_signal(signal.SIGKILL)
    finally:
        if timer is not None:
            timer.cancel()
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    return acks


# Key lookups walk every index file, so long runs check keys of a sample of the acks.
KEY_CHECKS_MAX = 600


def check_store(store: MessageStore, acks: list[Ack]) -> None:
    # Every acknowledged write is intact, by queue offset and by id; keys find them.
    key_check_every = max(1, len(acks) // KEY_CHECKS_MAX)
    for number, ack in enumerate(acks):
        (record,) = store.get_messages(ack.topic, ack.queue_id, ack.queue_offset, 1).messages
        assert record.physical_offset == ack.physical_offset
        assert record.body == expected_body(ack.key, ack.body_len)
        assert record.keys == (ack.key,)
        assert store.get_by_message_id(ack.msg_id) == record
        if number % key_check_every == 0:
            assert record in store.query_by_key(ack.topic, ack.key, 0, 2**62, 4)
            assert record in store.query_by_key(ack.topic, "U" + ack.key, 0, 2**62, 4)
    # Every unit points at a valid record of its queue, at its queue offset (dense), and the
    # ConsumeQueues hold exactly the CommitLog's records.
    log = store.commit_log
    in_log = {
        (info.topic, info.queue_id, info.queue_offset): physical_offset
        for physical_offset, view in log.scan(log.min_offset, log.max_offset)
        for info in (read_dispatch_info(view, 0),)
    }
    in_queues = {}
    for topic in TOPICS:
        for queue_id in range(QUEUE_COUNT):
            got = store.get_messages(topic, queue_id, 0, 10**6, max_bytes=2**40)
            assert [m.queue_offset for m in got] == list(range(got.max_queue_offset))
            for record in got:
                assert (record.topic, record.queue_id) == (topic, queue_id)
                in_queues[(topic, queue_id, record.queue_offset)] = record.physical_offset
    assert in_queues == in_log
    assert store.dispatched_physical_offset == log.max_offset


def crash_rounds(tmp_path, seed: int, kill_points: list[KillPoint]) -> None:
    root = str(tmp_path / "store")
    rng = random.Random(seed)
    acks: list[Ack] = []
    for round_number, kill in enumerate(kill_points):
        acks += run_and_kill(root, f"r{round_number}", rng.randrange(2**32), kill)
    assert acks, "the writers acknowledged nothing"
    store = MessageStore.open(crash_config(root))
    try:
        check_store(store, acks)
        # The recovered store takes writes where the queues left off.
        queue_end = store.max_queue_offset("orders", 0)
        assert store.put_message(Message("orders", 0, b"after")).queue_offset == queue_end
    finally:
        store.close()
    store = MessageStore.open(crash_config(root))  # and a clean reopen sees the same
    try:
        check_store(store, acks)
    finally:
        store.close()


def test_acknowledged_writes_survive_sigkill_at_several_points(tmp_path) -> None:
    rng = random.Random(20261122)
    kill_points = [
        KillPoint(after_acks=1),
        KillPoint(after_acks=17),
        KillPoint(after_s=rng.uniform(0.05, 0.3)),
        KillPoint(after_acks=60),
        KillPoint(after_s=rng.uniform(0.1, 0.5), during_open=True),
        KillPoint(after_s=rng.uniform(0.05, 0.3)),
    ]
    crash_rounds(tmp_path, 1, kill_points)


@pytest.mark.slow
def test_acknowledged_writes_survive_many_sigkills(tmp_path) -> None:
    rng = random.Random(7)
    kinds = (
        lambda: KillPoint(after_acks=rng.randint(1, 400)),
        lambda: KillPoint(after_s=rng.uniform(0.02, 1.5)),
        lambda: KillPoint(after_s=rng.uniform(0.05, 0.6), during_open=True),
    )
    kill_points = [kinds[i % 3]() for i in range(24)]
    crash_rounds(tmp_path, 2, kill_points)
