"""The simulated disk of one node: a LogStorage with a synced and an unsynced state.

Rules this module keeps:
- Every write (hard state, snapshot install, append, compaction) is applied at once to the
  *current* state, which the core reads (a real node reads its page cache), and queued as an
  operation. ``sync()`` replays the queued operations onto the *synced* state.
- ``crash()`` throws the queue away; with a torn write it first keeps a random prefix of the
  queued operations, the last one possibly cut short inside its entries (writes land in
  order). What survives becomes the synced state and the node restarts on it.
- A snapshot's data is the log prefix itself (``image``: entries 1..snapshot.index), as in
  raftlog where the snapshot is the CommitLog segments. The core can no longer read the image
  through ``entries()``/``term()``; the checkers and the state machine can.
- A write that breaks the log's shape (a gap, an index at or below the snapshot) is the core's
  contract violation and raises ``AssertionError`` with the reason.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import TypeAlias

from raftlog.raft.types import (
    ConfState,
    Entry,
    HardState,
    LogCompactedError,
    LogUnavailableError,
    SnapshotMeta,
)

NO_CHANGE = 1 << 62
"""``changed_from_index`` when nothing changed since the last ``take_changed_from``."""


@dataclass(frozen=True, slots=True)
class SetHardState:
    hard_state: HardState


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    meta: SnapshotMeta
    image: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class Append:
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class Compact:
    index: int
    conf_state: ConfState
    """Membership as of ``index``: what a restart from this snapshot point starts with."""


Operation: TypeAlias = SetHardState | InstallSnapshot | Append | Compact


@dataclass(slots=True)
class LogState:
    """Hard state, membership, snapshot point and log; entries[k].index == snapshot.index+1+k."""

    conf_state: ConfState
    hard_state: HardState = field(default_factory=HardState)
    snapshot: SnapshotMeta | None = None
    image: list[Entry] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    changed_from_index: int = NO_CHANGE
    """Lowest log index whose entry changed since the checker last looked."""

    @property
    def snapshot_index(self) -> int:
        return self.snapshot.index if self.snapshot is not None else 0

    @property
    def last_index(self) -> int:
        return self.snapshot_index + len(self.entries)

    def entry_at(self, index: int) -> Entry | None:
        """The entry at ``index`` from the image or the log; None past the end."""
        if index < 1:
            return None
        base = self.snapshot_index
        if index <= base:
            return self.image[index - 1]
        position = index - base - 1
        return self.entries[position] if position < len(self.entries) else None

    def take_changed_from(self) -> int | None:
        changed = self.changed_from_index
        self.changed_from_index = NO_CHANGE
        return None if changed == NO_CHANGE else changed

    def copy(self) -> LogState:
        return LogState(
            conf_state=self.conf_state,
            hard_state=self.hard_state,
            snapshot=self.snapshot,
            image=list(self.image),
            entries=list(self.entries),
        )

    def apply(self, operation: Operation) -> None:
        if isinstance(operation, SetHardState):
            self.hard_state = operation.hard_state
        elif isinstance(operation, InstallSnapshot):
            self._install(operation.meta, operation.image)
        elif isinstance(operation, Append):
            self._append(operation.entries)
        else:
            self._compact(operation.index, operation.conf_state)

    def _install(self, meta: SnapshotMeta, image: tuple[Entry, ...]) -> None:
        assert len(image) == meta.index, f"snapshot image holds {len(image)} != {meta.index}"
        assert not image or image[-1].term == meta.term, "snapshot term != last image entry"
        self.snapshot = meta
        self.conf_state = meta.conf_state
        self.image = list(image)
        self.entries = []
        self.changed_from_index = 1

    def _append(self, entries: tuple[Entry, ...]) -> None:
        base = self.snapshot_index
        # Entries already covered by the snapshot are committed; skipping them is what
        # etcd's MemoryStorage does too.
        entries = tuple(entry for entry in entries if entry.index > base)
        if not entries:
            return
        first = entries[0].index
        for previous, entry in itertools.pairwise(entries):
            assert entry.index == previous.index + 1, f"append not contiguous at {entry.index}"
        assert first <= self.last_index + 1, (
            f"append at {first} leaves a gap after last index {self.last_index}"
        )
        del self.entries[first - base - 1 :]
        self.entries.extend(entries)
        self.changed_from_index = min(self.changed_from_index, first)

    def _compact(self, index: int, conf_state: ConfState) -> None:
        base = self.snapshot_index
        if index <= base:
            return
        assert index <= self.last_index, f"compact to {index} past last index {self.last_index}"
        moved = self.entries[: index - base]
        del self.entries[: index - base]
        self.image.extend(moved)
        self.conf_state = conf_state
        self.snapshot = SnapshotMeta(index=index, term=moved[-1].term, conf_state=conf_state)


class SimDisk:
    """LogStorage for the core, plus the writers the driver uses while handling Ready."""

    def __init__(self, conf_state: ConfState) -> None:
        self.current = LogState(conf_state=conf_state)
        self.synced = LogState(conf_state=conf_state)
        self._unsynced: list[Operation] = []

    # -- LogStorage (reads see the current state) ------------------------------------------

    def initial_state(self) -> tuple[HardState, ConfState]:
        return self.current.hard_state, self.current.conf_state

    def entries(self, low: int, high: int, max_bytes: int) -> list[Entry]:
        state = self.current
        if low <= state.snapshot_index:
            raise LogCompactedError(f"entries from {low}: compacted to {state.snapshot_index}")
        if high > state.last_index + 1:
            raise LogUnavailableError(f"entries to {high}: last index is {state.last_index}")
        base = state.snapshot_index
        selected: list[Entry] = []
        size_bytes = 0
        for entry in state.entries[low - base - 1 : high - base - 1]:
            size_bytes += len(entry.data)
            if selected and size_bytes > max_bytes:
                break
            selected.append(entry)
        return selected

    def term(self, index: int) -> int:
        state = self.current
        base = state.snapshot_index
        if index == base:
            return state.snapshot.term if state.snapshot is not None else 0
        if index < base:
            raise LogCompactedError(f"term of {index}: compacted to {base}")
        if index > state.last_index:
            raise LogUnavailableError(f"term of {index}: last index is {state.last_index}")
        return state.entries[index - base - 1].term

    def first_index(self) -> int:
        return self.current.snapshot_index + 1

    def last_index(self) -> int:
        return self.current.last_index

    def snapshot(self) -> SnapshotMeta:
        state = self.current
        if state.snapshot is None:
            return SnapshotMeta(index=0, term=0, conf_state=state.conf_state)
        return state.snapshot

    # -- writers ---------------------------------------------------------------------------

    def set_hard_state(self, hard_state: HardState) -> None:
        self._write(SetHardState(hard_state))

    def apply_snapshot(self, meta: SnapshotMeta, image: tuple[Entry, ...]) -> None:
        self._write(InstallSnapshot(meta, image))

    def append(self, entries: list[Entry]) -> None:
        if entries:
            self._write(Append(tuple(entries)))

    def compact(self, index: int, conf_state: ConfState) -> None:
        self._write(Compact(index, conf_state))

    def _write(self, operation: Operation) -> None:
        self.current.apply(operation)
        self._unsynced.append(operation)

    # -- durability ------------------------------------------------------------------------

    def sync(self) -> None:
        for operation in self._unsynced:
            self.synced.apply(operation)
        self._unsynced.clear()

    def unsynced_count(self) -> int:
        return len(self._unsynced)

    def crash(self, rng: random.Random, torn: bool) -> int:
        """Lose the unsynced writes; with ``torn``, a random prefix of them lands first.
        Returns how many operations (a cut one counts) survived."""
        survived = 0
        if torn and self._unsynced:
            keep = rng.randint(0, len(self._unsynced))
            for operation in self._unsynced[:keep]:
                self.synced.apply(operation)
                survived += 1
            if keep < len(self._unsynced):
                cut = self._unsynced[keep]
                if isinstance(cut, Append):
                    kept_entries = rng.randint(0, len(cut.entries) - 1)
                    if kept_entries:
                        self.synced.apply(Append(cut.entries[:kept_entries]))
                        survived += 1
        self._unsynced.clear()
        self.current = self.synced.copy()
        return survived
