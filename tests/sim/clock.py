"""The simulated clock: an integer tick that only the simulation advances.

Rules: time is a count of ticks, never wall-clock seconds; nothing in tests/sim reads the real
clock, so a run depends on its seed alone.
"""

from __future__ import annotations


class SimClock:
    """Counts ticks from 0; one tick is one ``RawNode.tick()`` on every live node."""

    def __init__(self) -> None:
        self.now_tick = 0

    def advance(self) -> int:
        self.now_tick += 1
        return self.now_tick
