"""The push consumer's in-flight offset tracker (client/inflight_offsets.py): commits stop at
the lowest message still being consumed, windows count what a crash could re-deliver, and a
random out-of-order finish never lets the committed offset pass an unfinished message."""

from __future__ import annotations

import random
import threading

import pytest

from raftlog.client.inflight_offsets import InFlightOffsets


def test_the_commit_stops_at_the_lowest_unfinished_message() -> None:
    tracker = InFlightOffsets()
    for offset in (10, 11, 12, 15):  # 13 and 14 were skipped by the tag filter
        tracker.start(0, offset)
    assert tracker.committable({0: 16, 1: 4}) == {0: 10, 1: 4}
    tracker.finish(0, 11)
    tracker.finish(0, 12)
    assert tracker.committable({0: 16}) == {0: 10}  # 10 is slow: nothing past it
    assert tracker.window(0) == 4 and tracker.in_flight(0) == 2 and tracker.in_flight() == 2
    tracker.finish(0, 10)
    assert tracker.committable({0: 16}) == {0: 15}
    assert tracker.window(0) == 1
    tracker.finish(0, 15)
    assert tracker.committable({0: 16}) == {0: 16}  # the puller's position, past the skipped
    assert tracker.window(0) == 0 and tracker.in_flight() == 0


def test_misuse_is_refused() -> None:
    tracker = InFlightOffsets()
    tracker.start(0, 5)
    with pytest.raises(ValueError, match="must increase"):
        tracker.start(0, 5)
    with pytest.raises(ValueError, match="not in flight"):
        tracker.finish(0, 4)
    with pytest.raises(ValueError, match="never started"):
        tracker.finish(0, 6)
    with pytest.raises(ValueError, match="not in flight"):
        tracker.finish(1, 0)
    tracker.finish(0, 5)
    with pytest.raises(ValueError, match="not in flight"):
        tracker.finish(0, 5)  # twice


@pytest.mark.parametrize("seed", range(20))
def test_random_finishing_order_never_commits_past_an_unfinished_message(seed: int) -> None:
    chance = random.Random(seed)
    tracker = InFlightOffsets()
    started: list[int] = []
    unfinished: set[int] = set()
    position = 0
    for _ in range(300):
        if chance.random() < 0.5:
            position += chance.randint(1, 3)  # gaps: filtered messages
            tracker.start(0, position - 1)
            started.append(position - 1)
            unfinished.add(position - 1)
        elif unfinished:
            offset = chance.choice(sorted(unfinished))
            tracker.finish(0, offset)
            unfinished.discard(offset)
        committed = tracker.committable({0: position})[0]
        assert all(committed <= o for o in unfinished)
        assert committed == (min(unfinished) if unfinished else position)
        lowest = min(unfinished) if unfinished else position
        assert tracker.window(0) == sum(1 for o in started if o >= lowest)


def test_a_finish_wakes_a_waiter() -> None:
    tracker = InFlightOffsets()
    tracker.start(0, 0)
    finisher = threading.Timer(0.05, tracker.finish, (0, 0))
    finisher.start()
    tracker.wait_for_change(5.0)
    finisher.join()
    assert tracker.in_flight() == 0
