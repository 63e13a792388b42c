"""The trace of one simulation run: every event the run caused, in order.

Rules: events are plain tuples of ints, strings, enums and bytes (no objects whose repr
contains an address), so two runs of one seed give equal traces and ``digest()`` is stable
across processes; formatting happens only when a failure is reported.
"""

from __future__ import annotations

import hashlib

Event = tuple[object, ...]


class History:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, tick: int, kind: str, *fields: object) -> None:
        self.events.append((tick, kind, *fields))

    def tail(self, count: int) -> str:
        """The last ``count`` events, one per line, for a failure report."""
        return "\n".join(
            f"  t={event[0]} {event[1]} " + " ".join(str(part) for part in event[2:])
            for event in self.events[-count:]
        )

    def digest(self) -> str:
        """SHA-256 of the whole trace: equal digests mean the runs took the same steps."""
        hasher = hashlib.sha256()
        for event in self.events:
            hasher.update(repr(event).encode())
            hasher.update(b"\n")
        return hasher.hexdigest()
