"""The shadow of one node's Raft log: what the real storage (node/replication, over a
SimFileSystem) holds and what it promised durable, in a form the checkers read cheaply.

Rules this module keeps:
- Every write the real storage took (hard state, snapshot install, append, compaction) is
  applied at once to the *current* state and queued as an operation; ``sync()`` (the storage
  synced) replays the queue onto the *synced* state.
- ``reset_to`` replaces both with what the storage recovered after a power loss: the files
  decide what survived, never this model (shadow_log.reset_shadow).
- A snapshot's data is the log prefix itself (``image``: entries 1..snapshot.index), as in
  raftlog where the snapshot is the CommitLog segments; the checkers and the state machine
  read it.
- A write that breaks the log's shape (a gap, an index at or below the snapshot) is the core's
  contract violation and raises ``AssertionError`` with the reason.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TypeAlias

from raftlog.raft.types import ConfState, Entry, HardState, SnapshotMeta

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
    """The shadow of one node's Raft log (shadow_log.py): the same writes, current and synced."""

    def __init__(self, conf_state: ConfState) -> None:
        self.current = LogState(conf_state=conf_state)
        self.synced = LogState(conf_state=conf_state)
        self._unsynced: list[Operation] = []

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

    def reset_to(self, state: LogState) -> None:
        """After a restart: current and synced become what the real files recovered to."""
        self._unsynced.clear()
        self.current = state
        self.synced = state.copy()
        self.current.changed_from_index = self.synced.changed_from_index = 1

    def unsynced_count(self) -> int:
        return len(self._unsynced)
