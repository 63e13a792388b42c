"""SendFuture behaves as a concurrent.futures.Future: results, errors, timeouts, cancel,
callbacks, several waiting threads, and concurrent.futures.wait / as_completed."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from concurrent.futures import CancelledError, Future, InvalidStateError

import pytest

from raftlog.client.send_future import SendFuture


def test_it_has_the_fields_a_future_has() -> None:
    assert set(vars(SendFuture())) == set(vars(Future()))
    assert isinstance(SendFuture(), Future)


def test_result_exception_and_callbacks() -> None:
    future: SendFuture[int] = SendFuture()
    seen: list[int] = []
    future.add_done_callback(lambda f: seen.append(f.result()))
    assert not future.done() and not future.running()
    assert future.set_running_or_notify_cancel()
    assert future.running()
    future.set_result(7)
    assert future.done() and future.result(timeout=0) == 7 and future.exception() is None
    assert seen == [7]
    future.add_done_callback(lambda f: seen.append(f.result() + 1))
    assert seen == [7, 8]
    with pytest.raises(InvalidStateError):
        future.set_result(8)  # formats its repr under its own lock: must not deadlock
    failed: SendFuture[int] = SendFuture()
    failed.set_exception(ValueError("no"))
    with pytest.raises(ValueError, match="no"):
        failed.result()
    assert isinstance(failed.exception(), ValueError)
    assert "raised ValueError" in repr(failed)


def test_timeouts_and_cancel() -> None:
    future: SendFuture[int] = SendFuture()
    began = time.monotonic()
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(timeout=0.05)
    with pytest.raises(concurrent.futures.TimeoutError):
        future.exception(timeout=0)
    assert time.monotonic() - began >= 0.05
    assert future.cancel() and future.cancelled()
    with pytest.raises(CancelledError):
        future.result()
    assert not future.set_running_or_notify_cancel()
    running: SendFuture[int] = SendFuture()
    running.set_running_or_notify_cancel()
    assert not running.cancel()


def test_many_waiting_threads_are_all_woken() -> None:
    future: SendFuture[str] = SendFuture()
    results: list[str] = []
    lock = threading.Lock()

    def wait() -> None:
        value = future.result(timeout=10)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=wait) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)
    future.set_result("done")
    for thread in threads:
        thread.join(10)
    assert results == ["done"] * 8


def test_a_timed_out_waiter_does_not_disturb_the_others() -> None:
    future: SendFuture[int] = SendFuture()
    late: list[int] = []
    waiter = threading.Thread(target=lambda: late.append(future.result(timeout=10)))
    waiter.start()
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(timeout=0.02)
    future.set_result(3)
    waiter.join(10)
    assert late == [3]


def test_wait_and_as_completed() -> None:
    futures: list[SendFuture[int]] = [SendFuture() for _ in range(5)]
    setter = threading.Thread(
        target=lambda: [(time.sleep(0.01), f.set_result(i)) for i, f in enumerate(futures)]
    )
    setter.start()
    done, not_done = concurrent.futures.wait(futures, timeout=10)
    assert len(done) == 5 and not not_done
    assert sorted(f.result() for f in concurrent.futures.as_completed(futures, timeout=10)) == [
        0,
        1,
        2,
        3,
        4,
    ]
    setter.join(10)
    pending: SendFuture[int] = SendFuture()
    first = SendFuture[int]()
    first.set_result(1)
    done, not_done = concurrent.futures.wait(
        [pending, first], timeout=5, return_when=concurrent.futures.FIRST_COMPLETED
    )
    assert done == {first} and not_done == {pending}
