"""The unstable tail of the log: entries (and at most one snapshot) the core holds in memory
until the application reports them durable through ``advance()``.

Rules this module keeps:
- ``offset`` is always the index of the first unstable entry, i.e. the last stable index + 1,
  even when there are no unstable entries.
- A pending snapshot, if any, sits just before ``offset``: ``snapshot.index == offset - 1``.
- Entries are contiguous and their indexes strictly increase from ``offset``.
"""

from __future__ import annotations

from raftlog.raft.types import Entry, SnapshotMeta


class Unstable:
    def __init__(self, offset: int) -> None:
        assert offset >= 1
        self.offset = offset
        self.entries: list[Entry] = []
        self.snapshot: SnapshotMeta | None = None

    def maybe_first_index(self) -> int | None:
        """The first index of the log if a pending snapshot defines it."""
        if self.snapshot is not None:
            return self.snapshot.index + 1
        return None

    def maybe_last_index(self) -> int | None:
        if self.entries:
            return self.offset + len(self.entries) - 1
        if self.snapshot is not None:
            return self.snapshot.index
        return None

    def maybe_term(self, index: int) -> int | None:
        """The term at ``index`` if this tail knows it, else None (ask stable storage)."""
        if index < self.offset:
            if self.snapshot is not None and self.snapshot.index == index:
                return self.snapshot.term
            return None
        last_index = self.maybe_last_index()
        if last_index is None or index > last_index:
            return None
        return self.entries[index - self.offset].term

    def stable_to(self, index: int, term: int) -> None:
        """Entries up to ``index`` became durable. Ignored when the entry at ``index`` has been
        replaced since the Ready that carried it (its term no longer matches)."""
        if index < self.offset or self.maybe_term(index) != term:
            return
        del self.entries[: index + 1 - self.offset]
        self.offset = index + 1

    def stable_snapshot_to(self, index: int) -> None:
        if self.snapshot is not None and self.snapshot.index == index:
            self.snapshot = None

    def restore(self, snapshot: SnapshotMeta) -> None:
        self.offset = snapshot.index + 1
        self.entries = []
        self.snapshot = snapshot

    def truncate_and_append(self, entries: list[Entry]) -> None:
        """Append ``entries``; an entry whose index is already held replaces it and the rest."""
        assert entries
        first_index = entries[0].index
        if first_index == self.offset + len(self.entries):
            self.entries.extend(entries)
        elif first_index <= self.offset:
            # The new entries replace the whole unstable tail (and, once persisted, the
            # conflicting part of stable storage: the Ready contract truncates it there).
            self.offset = first_index
            self.entries = list(entries)
        else:
            del self.entries[first_index - self.offset :]
            self.entries.extend(entries)
