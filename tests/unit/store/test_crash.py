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


def run_and_kill(
    root: str, run_id: str, seed: int, kill_after_acks: int | None, kill_after_s: float | None
) -> list[Ack]:
    """Start a writer, SIGKILL it after ``kill_after_acks`` acks or ``kill_after_s`` seconds
    of writing; return every ack it printed (lines read after the kill count too)."""
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
    try:
        assert child.stdout.readline().strip() == "READY"
        if kill_after_s is not None:
            timer = threading.Timer(kill_after_s, child.send_signal, (signal.SIGKILL,))
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
            if kill_after_acks is not None and len(acks) == kill_after_acks:
                child.send_signal(signal.SIGKILL)
    finally:
        if timer is not None:
            timer.cancel()
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    return acks


def check_store(store: MessageStore, acks: list[Ack]) -> None:
    # Every acknowledged write is intact, by queue offset, by id and by key.
    for ack in acks:
        (record,) = store.get_messages(ack.topic, ack.queue_id, ack.queue_offset, 1).messages
        assert record.physical_offset == ack.physical_offset
        assert record.body == expected_body(ack.key, ack.body_len)
        assert record.keys == (ack.key,)
        assert store.get_by_message_id(ack.msg_id) == record
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


def crash_rounds(tmp_path, seed: int, kill_points) -> None:
    root = str(tmp_path / "store")
    rng = random.Random(seed)
    acks: list[Ack] = []
    for round_number, (kill_after_acks, kill_after_s) in enumerate(kill_points):
        acks += run_and_kill(
            root, f"r{round_number}", rng.randrange(2**32), kill_after_acks, kill_after_s
        )
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
        (1, None),
        (17, None),
        (None, rng.uniform(0.05, 0.3)),
        (60, None),
        (None, rng.uniform(0.05, 0.3)),
    ]
    crash_rounds(tmp_path, 1, kill_points)


@pytest.mark.slow
def test_acknowledged_writes_survive_many_sigkills(tmp_path) -> None:
    rng = random.Random(7)
    kill_points = [
        (rng.randint(1, 400), None) if i % 2 else (None, rng.uniform(0.02, 1.5)) for i in range(30)
    ]
    crash_rounds(tmp_path, 2, kill_points)
