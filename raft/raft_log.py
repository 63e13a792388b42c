"""The core's view of one replica's log: stable storage (read-only, through ``LogStorage``)
followed by the unstable tail the application has not yet persisted, plus the commit and
applied indexes.

Rules this module keeps:
- ``applied <= committed <= last_index()``, and ``committed`` never decreases.
- Indexes below ``first_index() - 1`` are compacted; ``term(first_index() - 1)`` answers (it is
  the snapshot point); index 0 has term 0.
- A committed entry is never truncated (an assertion, except under the planted bug
  SKIP_LOG_MATCHING_CHECK, which exists to break exactly this).
- Byte limits count ``Entry.data`` and always let at least one entry through, so one oversized
  entry can never wedge replication or apply.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.raft.types import (
    Entry,
    LogCompactedError,
    LogStorage,
    LogUnavailableError,
    SnapshotMeta,
)
from raftlog.raft.unstable import Unstable


def cut_index(
    entries: Sequence[Entry], start: int, stop: int, max_bytes: int, used_bytes: int = 0
) -> int:
    """The end of the longest run ``entries[start:end]`` (end <= stop) whose data, added to
    ``used_bytes`` already taken, fits in ``max_bytes``. When nothing was taken yet the run
    holds at least one entry. Walks only as far as the cut, so a small batch out of a long
    log costs what the batch costs."""
    total_bytes = used_bytes
    for position in range(start, stop):
        total_bytes += len(entries[position].data)
        if total_bytes > max_bytes and (position > start or used_bytes > 0):
            return position
    return stop


class RaftLog:
    def __init__(self, storage: LogStorage) -> None:
        self.storage = storage
        first_index = storage.first_index()
        self.unstable = Unstable(storage.last_index() + 1)
        self.committed = first_index - 1
        self.applied = first_index - 1

    # --- shape -----------------------------------------------------------------------------

    def first_index(self) -> int:
        first_index = self.unstable.maybe_first_index()
        return first_index if first_index is not None else self.storage.first_index()

    def last_index(self) -> int:
        last_index = self.unstable.maybe_last_index()
        return last_index if last_index is not None else self.storage.last_index()

    def last_stable_index(self) -> int:
        """The highest index known durable (0 while a received snapshot is being installed)."""
        if self.unstable.snapshot is not None:
            return 0
        return self.unstable.offset - 1

    def term(self, index: int) -> int:
        """Raises LogCompactedError / LogUnavailableError outside [first_index()-1, last]."""
        if index < self.first_index() - 1:
            raise LogCompactedError(index)
        if index > self.last_index():
            raise LogUnavailableError(index)
        term = self.unstable.maybe_term(index)
        if term is not None:
            return term
        return self.storage.term(index)

    def term_or_zero(self, index: int) -> int:
        try:
            return self.term(index)
        except (LogCompactedError, LogUnavailableError):
            return 0

    def last_term(self) -> int:
        return self.term(self.last_index())

    def match_term(self, index: int, term: int) -> bool:
        try:
            return self.term(index) == term
        except (LogCompactedError, LogUnavailableError):
            return False

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: a candidate's log is at least as up-to-date as ours."""
        our_last_term = self.last_term()
        return last_term > our_last_term or (
            last_term == our_last_term and last_index >= self.last_index()
        )

    def snapshot(self) -> SnapshotMeta:
        if self.unstable.snapshot is not None:
            return self.unstable.snapshot
        return self.storage.snapshot()

    # --- reading entries -------------------------------------------------------------------

    def slice(self, low: int, high: int, max_bytes: int) -> list[Entry]:
        """Entries [low, high), at least one if the range is non-empty, then within
        ``max_bytes``. Raises LogCompactedError when ``low`` is compacted."""
        if low < self.first_index():
            raise LogCompactedError(low)
        assert low <= high <= self.last_index() + 1, (low, high, self.last_index())
        if low == high:
            return []
        offset = self.unstable.offset
        stored: list[Entry] = []
        if low < offset:
            stored = self.storage.entries(low, min(high, offset), max_bytes)
            if len(stored) < min(high, offset) - low or high <= offset:
                return stored  # done, or the byte limit stopped storage early
        start = max(low, offset) - offset
        used_bytes = sum(len(entry.data) for entry in stored)
        tail = self.unstable.entries
        end = cut_index(tail, start, high - offset, max_bytes, used_bytes)
        return stored + tail[start:end]

    def entries_from(self, low: int, max_bytes: int) -> list[Entry]:
        if low > self.last_index():
            return []
        return self.slice(low, self.last_index() + 1, max_bytes)

    def next_committed_entries(self, max_bytes: int) -> list[Entry]:
        """Committed entries not yet applied, from the first one, within ``max_bytes``."""
        low = max(self.applied + 1, self.first_index())
        if self.committed + 1 <= low:
            return []
        return self.slice(low, self.committed + 1, max_bytes)

    def has_next_committed_entries(self) -> bool:
        return self.committed + 1 > max(self.applied + 1, self.first_index())

    # --- changing the log ------------------------------------------------------------------

    def find_conflict(self, entries: Sequence[Entry]) -> int:
        """Index of the first entry whose term differs from ours (or that we lack); 0 if all
        of them are already here."""
        for entry in entries:
            if not self.match_term(entry.index, entry.term):
                return entry.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest (index', term') with index' <= index and term' <= term in our log: the
        fast-backtracking hint (etcd-io/raft). Stops at the compaction point."""
        index = min(index, self.last_index())
        while index > 0:
            try:
                our_term = self.term(index)
            except LogCompactedError:
                return index, 0
            if our_term <= term:
                return index, our_term
            index -= 1
        return 0, 0

    def append(self, entries: Sequence[Entry], allow_truncating_committed: bool = False) -> int:
        if not entries:
            return self.last_index()
        assert allow_truncating_committed or entries[0].index > self.committed, (
            "truncating a committed entry",
            entries[0].index,
            self.committed,
        )
        self.unstable.truncate_and_append(list(entries))
        return self.last_index()

    def maybe_append(
        self,
        prev_index: int,
        prev_term: int,
        leader_commit: int,
        entries: Sequence[Entry],
        skip_matching_check: bool = False,
    ) -> int | None:
        """Raft's AppendEntries receiver rules 2-5. Returns the last index now known to match
        the leader's log, or None if the entry at ``prev_index`` does not match."""
        if skip_matching_check:
            # PlantedBug.SKIP_LOG_MATCHING_CHECK: accept whenever there is no hole before
            # prev_index + 1, whatever the term there.
            matches = prev_index <= self.last_index()
        else:
            matches = self.match_term(prev_index, prev_term)
        if not matches:
            return None
        last_new_index = prev_index + len(entries)
        conflict_index = self.find_conflict(entries)
        if conflict_index != 0:
            self.append(
                entries[conflict_index - prev_index - 1 :],
                allow_truncating_committed=skip_matching_check,
            )
        self.commit_to(min(leader_commit, last_new_index))
        return last_new_index

    def commit_to(self, commit_index: int) -> None:
        if commit_index > self.committed:
            assert commit_index <= self.last_index(), (
                "commit index beyond the log: was the log lost?",
                commit_index,
                self.last_index(),
            )
            self.committed = commit_index

    def applied_to(self, applied_index: int) -> None:
        if applied_index > self.applied:
            assert applied_index <= self.committed, (applied_index, self.committed)
            self.applied = applied_index

    def stable_to(self, index: int, term: int) -> None:
        self.unstable.stable_to(index, term)

    def stable_snapshot_to(self, index: int) -> None:
        self.unstable.stable_snapshot_to(index)

    def restore(self, snapshot: SnapshotMeta) -> None:
        """Replace the whole log by ``snapshot`` (a far-behind follower catching up)."""
        self.committed = snapshot.index
        self.unstable.restore(snapshot)
