"""The simulated network: a heap of (deliver_tick, sequence, envelope) with seeded faults.

Rules this module keeps:
- Every random choice comes from the ``random.Random`` handed in; the ``sequence`` number breaks
  ties, so two messages due on the same tick are delivered in the order they were sent and
  the heap never compares messages.
- Faults are decided when a message is sent (drop, duplicate, delay; reordering falls out of
  unequal delays) and when it is due (a partition that blocks the link now drops it).
- Partitions are sets of blocked directed links: a symmetric partition blocks both directions,
  a one-way partition only ``source -> target``.
- Every delay is at least one tick, so a delivery loop for one tick always terminates.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable
from dataclasses import dataclass

from raftlog.raft.types import Entry, Message, NodeId


@dataclass(frozen=True, slots=True)
class Envelope:
    """One message on the wire, with what the simulation needs to deliver it."""

    message: Message
    sequence: int
    sent_tick: int
    deliver_tick: int
    source_incarnation: int
    """Which life of the source sent it: a snapshot report goes back only to that life."""
    snapshot_copy: SnapshotCopy | None = None
    """SNAPSHOT only: what the real transport copies before handing the message over."""


@dataclass(frozen=True, slots=True)
class SnapshotCopy:
    """A leader's snapshot as the segment transfer carries it: its CommitLog segment files up
    to where the snapshot's entry ends, plus the log prefix (``image``) for the checkers."""

    image: tuple[Entry, ...]
    files: tuple[tuple[str, bytes], ...]
    end_physical_offset: int


@dataclass(slots=True)
class NetworkFaults:
    """Per-message fault probabilities; the heal phase sets them all to zero."""

    drop_probability: float = 0.0
    duplicate_probability: float = 0.0
    delay_probability: float = 0.0
    """Chance a message is late by 1..delay_ticks_max extra ticks (this is what reorders)."""
    delay_ticks_max: int = 0


class Network:
    """Messages in flight between simulated nodes."""

    def __init__(self, rng: random.Random, faults: NetworkFaults) -> None:
        self._rng = rng
        self.faults = faults
        self._heap: list[tuple[int, int, Envelope]] = []
        self._next_sequence = 0
        self._blocked: set[tuple[NodeId, NodeId]] = set()

    # -- sending -------------------------------------------------------------------------

    def send(
        self,
        message: Message,
        now_tick: int,
        source_incarnation: int,
        snapshot_copy: SnapshotCopy | None = None,
    ) -> int:
        """Queue ``message``; returns how many copies are in flight (0 = dropped)."""
        if self.is_blocked(message.source, message.target):
            return 0
        if self._rng.random() < self.faults.drop_probability:
            return 0
        copies = 2 if self._rng.random() < self.faults.duplicate_probability else 1
        for _ in range(copies):
            deliver_tick = now_tick + 1
            faults = self.faults
            if faults.delay_ticks_max > 0 and self._rng.random() < faults.delay_probability:
                deliver_tick += self._rng.randint(1, faults.delay_ticks_max)
            envelope = Envelope(
                message=message,
                sequence=self._next_sequence,
                sent_tick=now_tick,
                deliver_tick=deliver_tick,
                source_incarnation=source_incarnation,
                snapshot_copy=snapshot_copy,
            )
            self._next_sequence += 1
            heapq.heappush(self._heap, (deliver_tick, envelope.sequence, envelope))
        return copies

    # -- receiving -----------------------------------------------------------------------

    def pop_due(self, now_tick: int) -> Envelope | None:
        """The next envelope due at or before ``now_tick``, or None. The caller asks
        ``is_blocked`` at that moment, because a partition may have begun in flight."""
        if self._heap and self._heap[0][0] <= now_tick:
            return heapq.heappop(self._heap)[2]
        return None

    def pending(self) -> list[Envelope]:
        """Everything in flight, in delivery order."""
        return [envelope for _, _, envelope in sorted(self._heap)]

    def take(self, sequence: int) -> Envelope:
        """Remove one envelope chosen by the caller (the Hypothesis machine's schedule)."""
        for position, (_, seq, envelope) in enumerate(self._heap):
            if seq == sequence:
                self._heap[position] = self._heap[-1]
                self._heap.pop()
                heapq.heapify(self._heap)
                return envelope
        raise KeyError(sequence)

    def in_flight_count(self) -> int:
        return len(self._heap)

    # -- partitions ----------------------------------------------------------------------

    def partition(
        self, side_a: Iterable[NodeId], side_b: Iterable[NodeId], one_way: bool = False
    ) -> None:
        """Block a -> b for every a in side_a and b in side_b; also b -> a unless one_way."""
        for a in sorted(side_a):
            for b in sorted(side_b):
                if a == b:
                    continue
                self._blocked.add((a, b))
                if not one_way:
                    self._blocked.add((b, a))

    def heal(self) -> None:
        self._blocked.clear()

    def is_blocked(self, source: NodeId, target: NodeId) -> bool:
        return (source, target) in self._blocked

    def blocked_links(self) -> list[tuple[NodeId, NodeId]]:
        return sorted(self._blocked)
