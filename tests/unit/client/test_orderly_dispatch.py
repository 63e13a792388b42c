"""The push consumer's orderly delivery (client/orderly_dispatch.py) on a real thread pool
with an explicit clock for suspensions: one message of a queue at a time and in order,
queues side by side, a refused message offered again (never skipped) after the pause, no
delivery while the lock may not be used, and revoke drops what waits and waits for what runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from raftlog.client.messages import Message
from raftlog.client.orderly_dispatch import OrderlyDispatch

WAIT_S = 5.0
SUSPEND_S = 1.0


class Clock:
    def __init__(self) -> None:
        self.now_s = 50.0

    def __call__(self) -> float:
        return self.now_s


def message(queue_id: int, offset: int) -> Message:
    return Message(
        topic="t",
        queue_id=queue_id,
        queue_offset=offset,
        physical_offset=offset,
        msg_id="",
        body=b"%d" % offset,
    )


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=4)
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


class Listener:
    """Records (queue, offset) per call; refuses what ``refuse`` names once each; blocks on
    ``gates`` per queue; counts concurrent calls per queue."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []
        self.refuse: set[tuple[int, int]] = set()
        self.gates: dict[int, threading.Event] = {}
        self.running: dict[int, int] = {}
        self.overlapped = False
        self._lock = threading.Lock()

    def __call__(self, message: Message, generation: int) -> bool:
        key = (message.queue_id, message.queue_offset)
        with self._lock:
            self.running[message.queue_id] = self.running.get(message.queue_id, 0) + 1
            self.overlapped |= self.running[message.queue_id] > 1
            self.calls.append(key)
        gate = self.gates.get(message.queue_id)
        if gate is not None:
            gate.wait(WAIT_S)
        with self._lock:
            self.running[message.queue_id] -= 1
            if key in self.refuse:
                self.refuse.discard(key)
                return False
        return True


def dispatch(
    pool: ThreadPoolExecutor, listener: Listener, clock: Clock, usable: Callable[[int], bool]
) -> OrderlyDispatch:
    def submit(task: Callable[[], None]) -> bool:
        pool.submit(task)
        return True

    return OrderlyDispatch(submit, listener, usable, SUSPEND_S, clock)


def test_one_message_of_a_queue_at_a_time_in_order_and_queues_side_by_side(
    pool: ThreadPoolExecutor,
) -> None:
    listener, clock = Listener(), Clock()
    listener.gates[0] = threading.Event()
    orderly = dispatch(pool, listener, clock, lambda q: True)
    for offset in range(20):
        orderly.add(message(0, offset), 0)
        orderly.add(message(1, offset), 0)
    # Queue 0 is stuck in its first message; queue 1 goes on meanwhile.
    wait_until(lambda: listener.calls.count((1, 19)) == 1, "queue 1")
    assert [c for c in listener.calls if c[0] == 0] == [(0, 0)]
    listener.gates[0].set()
    wait_until(lambda: (0, 19) in listener.calls, "queue 0")
    assert [o for q, o in listener.calls if q == 0] == list(range(20))
    assert [o for q, o in listener.calls if q == 1] == list(range(20))
    assert not listener.overlapped


def test_a_refused_message_comes_again_after_the_pause_before_later_ones(
    pool: ThreadPoolExecutor,
) -> None:
    listener, clock = Listener(), Clock()
    listener.refuse = {(0, 2)}
    orderly = dispatch(pool, listener, clock, lambda q: True)
    for offset in range(5):
        orderly.add(message(0, offset), 0)
    wait_until(lambda: (0, 2) in listener.calls, "the refused message")
    time.sleep(0.05)
    assert listener.calls == [(0, 0), (0, 1), (0, 2)]
    assert orderly.next_due_s() == pytest.approx(clock.now_s + SUSPEND_S)
    orderly.resume_due()  # not due yet
    time.sleep(0.05)
    assert len(listener.calls) == 3
    clock.now_s += SUSPEND_S
    orderly.resume_due()
    wait_until(lambda: (0, 4) in listener.calls, "the rest")
    assert listener.calls == [(0, 0), (0, 1), (0, 2), (0, 2), (0, 3), (0, 4)]
    assert orderly.next_due_s() is None


def test_nothing_is_delivered_while_the_lock_may_not_be_used(pool: ThreadPoolExecutor) -> None:
    listener, clock = Listener(), Clock()
    locked = {0: False}
    orderly = dispatch(pool, listener, clock, lambda q: locked[q])
    orderly.add(message(0, 0), 0)
    wait_until(lambda: orderly.next_due_s() is not None, "the suspension")
    assert listener.calls == []
    locked[0] = True
    clock.now_s += SUSPEND_S
    orderly.resume_due()
    wait_until(lambda: listener.calls == [(0, 0)], "the delivery")


def test_revoke_drops_what_waits_and_waits_for_what_runs(pool: ThreadPoolExecutor) -> None:
    listener, clock = Listener(), Clock()
    listener.gates[0] = threading.Event()
    orderly = dispatch(pool, listener, clock, lambda q: True)
    for offset in range(5):
        orderly.add(message(0, offset), 0)
    wait_until(lambda: listener.calls == [(0, 0)], "the first message")
    assert not orderly.revoke([0], timeout_s=0.05)  # still in the listener
    releaser = threading.Timer(0.1, listener.gates[0].set)
    releaser.start()
    # A second revoke of a queue already forgotten returns at once.
    assert orderly.revoke([0], timeout_s=1.0)
    releaser.join()
    time.sleep(0.05)
    assert listener.calls == [(0, 0)]  # the waiting ones were dropped
    # Read again later: a fresh queue, delivered from what is added now.
    del listener.gates[0]
    orderly.add(message(0, 3), 1)
    wait_until(lambda: listener.calls == [(0, 0), (0, 3)], "the queue read again")
