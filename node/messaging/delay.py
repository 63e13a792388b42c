"""The delay levels and the bounds of a requested delay: what ``Producer.send(delay_level=N)``
and ``Producer.send(deliver_at_ms=T)`` may ask for, and where each lands in the schedule topic.

Layout of the schedule topic (``SCHEDULE_TOPIC_XXXX``, RocketMQ's name and layout): level N
is queue N - 1, so each level's queue is in delivery-time order; the arbitrary delivery times
(RocketMQ 5's timer) share one more queue, ``TIMER_QUEUE_ID``, whose order is arrival order.
The topic has ``SCHEDULE_QUEUE_COUNT`` queues whatever the level setting, so a queue id never
changes meaning when the setting does.

Rules this module keeps:
- The level table is a node setting (``message_delay_level``, RocketMQ's messageDelayLevel):
  space-separated durations with a unit (``ms``, ``s``, ``m``, ``h``, ``d``), each positive,
  at most ``MAX_DELAY_LEVELS``. Every member must run the same table.
- A refused delay is INVALID_ARGUMENT (InvalidRequestError) whose message names the bound and
  the setting behind it; nothing is written.
- A delivery time at or before now is no delay: the message goes to its topic at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from raftlog.node.errors import InvalidRequestError

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DEFAULT_TIMER_MAX_DELAY_MS = 3 * 24 * 3600 * 1000  # RocketMQ's timerMaxDelaySec: 3 days
MAX_DELAY_LEVELS = 64
TIMER_QUEUE_ID = MAX_DELAY_LEVELS
SCHEDULE_QUEUE_COUNT = MAX_DELAY_LEVELS + 1
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"([0-9]{1,9})(ms|s|m|h|d)")


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The level table ``text`` describes, in ms (level N is item N - 1); ValueError naming
    the bad item otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a string of durations")
    levels: list[int] = []
    for item in text.split():
        match = _DURATION.fullmatch(item)
        if match is None or int(match.group(1)) == 0:
            raise ValueError(f"{item!r} is not a positive duration such as 500ms, 1s, 2m, 1h or 1d")
        levels.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    if not 1 <= len(levels) <= MAX_DELAY_LEVELS:
        raise ValueError(f"{len(levels)} levels; there must be 1..{MAX_DELAY_LEVELS}")
    return tuple(levels)


def format_duration_ms(duration_ms: int) -> str:
    """``duration_ms`` in the largest unit that divides it (``90000`` -> ``"90s"``)."""
    for unit in ("d", "h", "m", "s"):
        if duration_ms % _UNIT_MS[unit] == 0:
            return f"{duration_ms // _UNIT_MS[unit]}{unit}"
    return f"{duration_ms}ms"


@dataclass(frozen=True, slots=True)
class DelaySettings:
    """The node's delay settings (node/config.py builds them)."""

    levels_ms: tuple[int, ...] = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    timer_max_delay_ms: int = DEFAULT_TIMER_MAX_DELAY_MS

    def level_delay_ms(self, level: int) -> int:
        """The delay of ``level`` (1-based); InvalidRequestError naming the bound outside
        1..len(levels)."""
        if not 1 <= level <= len(self.levels_ms):
            raise InvalidRequestError(
                f"delay_level {level} is outside 1..{len(self.levels_ms)} (the node's "
                f"message_delay_level has {len(self.levels_ms)} levels: "
                f"{' '.join(format_duration_ms(d) for d in self.levels_ms)})"
            )
        return self.levels_ms[level - 1]

    def check_deliver_at(self, deliver_at_ms: int, now_ms: int) -> None:
        """InvalidRequestError when ``deliver_at_ms`` is negative or further ahead of
        ``now_ms`` than ``timer_max_delay_ms``."""
        if deliver_at_ms < 0:
            raise InvalidRequestError(f"deliver_at_ms must be >= 0, got {deliver_at_ms}")
        ahead_ms = deliver_at_ms - now_ms
        if ahead_ms > self.timer_max_delay_ms:
            raise InvalidRequestError(
                f"deliver_at_ms {deliver_at_ms} is {ahead_ms} ms ahead; the bound is "
                f"timer_max_delay_ms = {self.timer_max_delay_ms} "
                f"({format_duration_ms(self.timer_max_delay_ms)})"
            )


def level_queue_id(level: int) -> int:
    """The schedule topic queue of ``level`` (RocketMQ's delayLevel - 1)."""
    return level - 1
