"""The delay level table (RocketMQ's messageDelayLevel) and the bounds of a requested delay."""

from __future__ import annotations

import pytest

from raftlog.node.errors import InvalidRequestError
from raftlog.node.messaging.delay import (
    DEFAULT_DELAY_LEVELS,
    MAX_DELAY_LEVELS,
    TIMER_QUEUE_ID,
    DelaySettings,
    format_duration_ms,
    level_queue_id,
    parse_delay_levels,
)


def test_default_levels_are_rocketmqs() -> None:
    levels = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    assert len(levels) == 18
    assert levels[:4] == (1000, 5000, 10_000, 30_000)
    assert levels[-1] == 2 * 3600 * 1000
    assert [format_duration_ms(d) for d in levels] == DEFAULT_DELAY_LEVELS.split()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("500ms 1s", (500, 1000)), ("  2m\t1h 1d ", (120_000, 3_600_000, 86_400_000))],
)
def test_levels_parse(text: str, expected: tuple[int, ...]) -> None:
    assert parse_delay_levels(text) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "0 levels"),
        ("1s 0s", "'0s' is not a positive duration"),
        ("1s 5x", "'5x'"),
        ("-1s", "'-1s'"),
        (" ".join(["1s"] * (MAX_DELAY_LEVELS + 1)), f"there must be 1..{MAX_DELAY_LEVELS}"),
    ],
)
def test_bad_levels_are_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_delay_levels(text)


def test_level_queues_and_the_timer_queue_never_meet() -> None:
    assert level_queue_id(1) == 0
    assert level_queue_id(MAX_DELAY_LEVELS) < TIMER_QUEUE_ID


def test_level_bounds_name_the_setting() -> None:
    settings = DelaySettings(parse_delay_levels("1s 2s 3s"))
    assert settings.level_delay_ms(3) == 3000
    for level in (0, 4):
        with pytest.raises(InvalidRequestError, match=r"outside 1\.\.3 .*message_delay_level"):
            settings.level_delay_ms(level)


def test_delivery_time_bounds_name_the_setting() -> None:
    settings = DelaySettings(timer_max_delay_ms=60_000)
    settings.check_deliver_at(1_060_000, now_ms=1_000_000)
    settings.check_deliver_at(5, now_ms=1_000_000)  # the past: delivered at once
    with pytest.raises(InvalidRequestError, match="timer_max_delay_ms = 60000 \\(1m\\)"):
        settings.check_deliver_at(1_060_001, now_ms=1_000_000)
    with pytest.raises(InvalidRequestError, match="must be >= 0"):
        settings.check_deliver_at(-1, now_ms=1_000_000)
