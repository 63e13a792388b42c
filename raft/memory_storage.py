"""MemoryStorage: an in-memory ``LogStorage`` plus the writer methods the application calls
while handling a Ready (tests, the simulation and benchmarks use it; raftlog's node stores the
log in the CommitLog instead).

Rules this module keeps:
- ``_entries[0]`` is a dummy entry standing for the snapshot point: its index is
  ``first_index() - 1`` and its term is the snapshot's term, so ``term(first_index() - 1)``
  answers as the LogStorage contract requires.
- The membership returned by ``initial_state()`` is the one at the snapshot point (it is what
  the core replays later configuration entries on top of; see RawNode).
- A fresh storage starts at the bootstrap membership at index 0. Every node of a cluster,
  including one added later, starts from the same bootstrap membership (or from a snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.raft.raft_log import cut_index
from raftlog.raft.types import (
    ConfState,
    Entry,
    HardState,
    LogCompactedError,
    LogUnavailableError,
    Ready,
    SnapshotMeta,
)


class MemoryStorage:
    def __init__(self, conf_state: ConfState | None = None) -> None:
        self.hard_state = HardState()
        self._snapshot = SnapshotMeta(0, 0, conf_state or ConfState(voters=()))
        self._entries: list[Entry] = [Entry(0, 0)]

    # --- LogStorage ------------------------------------------------------------------------

    def initial_state(self) -> tuple[HardState, ConfState]:
        return self.hard_state, self._snapshot.conf_state

    def first_index(self) -> int:
        return self._entries[0].index + 1

    def last_index(self) -> int:
        return self._entries[0].index + len(self._entries) - 1

    def term(self, index: int) -> int:
        offset = self._entries[0].index
        if index < offset:
            raise LogCompactedError(index)
        if index > self.last_index():
            raise LogUnavailableError(index)
        return self._entries[index - offset].term

    def entries(self, low: int, high: int, max_bytes: int) -> list[Entry]:
        offset = self._entries[0].index
        if low <= offset:
            raise LogCompactedError(low)
        if high > self.last_index() + 1:
            raise LogUnavailableError(high)
        start, stop = low - offset, high - offset
        return self._entries[start : cut_index(self._entries, start, stop, max_bytes)]

    def snapshot(self) -> SnapshotMeta:
        return self._snapshot

    # --- writers (the application, while handling a Ready) ---------------------------------

    def persist(self, ready: Ready) -> None:
        """Ready step 1 in one call: install the snapshot, append the entries, store the hard
        state (memory needs no fsync, so ``must_sync`` is met by construction)."""
        if ready.snapshot is not None:
            self.apply_snapshot(ready.snapshot)
        self.append(ready.entries)
        if ready.hard_state is not None:
            self.set_hard_state(ready.hard_state)

    def set_hard_state(self, hard_state: HardState) -> None:
        self.hard_state = hard_state

    def append(self, entries: Sequence[Entry]) -> None:
        """Append, replacing any stored entry at or after ``entries[0].index`` (Ready step 1)."""
        if not entries:
            return
        first_new_index = entries[0].index
        assert first_new_index <= self.last_index() + 1, "a hole in the log"
        offset = self._entries[0].index
        if first_new_index <= offset:
            # Everything up to the snapshot point is already covered by the snapshot.
            entries = entries[offset + 1 - first_new_index :]
            if not entries:
                return
            first_new_index = entries[0].index
        del self._entries[first_new_index - offset :]
        self._entries.extend(entries)

    def apply_snapshot(self, snapshot: SnapshotMeta) -> None:
        """Replace the log by ``snapshot`` (a follower installing one; Ready step 1)."""
        if snapshot.index <= self._snapshot.index:
            return
        self._snapshot = snapshot
        self._entries = [Entry(snapshot.index, snapshot.term)]

    def compact(self, compact_index: int, conf_state: ConfState) -> None:
        """Drop entries up to ``compact_index``, which becomes the snapshot point with
        membership ``conf_state`` (the caller's membership as of that index: take it from
        ``RawNode.status().conf_state`` when compacting up to the applied index)."""
        offset = self._entries[0].index
        if compact_index <= offset:
            return
        assert compact_index <= self.last_index(), "compacting beyond the log"
        term = self.term(compact_index)
        self._snapshot = SnapshotMeta(compact_index, term, conf_state)
        self._entries = [Entry(compact_index, term), *self._entries[compact_index - offset + 1 :]]
