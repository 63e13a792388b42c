"""Master epochs: which master wrote which part of a replica's CommitLog, and where two
replicas' logs stop agreeing (RocketMQ 5's epoch file and its "last consistent point").

Every replica keeps ``EpochHistory``: one ``(epoch, start_offset)`` per master term it holds
bytes of, in order; the bytes from ``start_offset`` up to the next entry's start (or the log's
end) were written by the master of ``epoch``. A new master appends ``(its epoch, its end)``
before it writes; a slave copies the master's entries as it copies its bytes.

Rules this module keeps:
- Epochs and start offsets strictly increase; the file is replaced atomically (temporary,
  fsync, rename, directory fsync), so a crash leaves the old or the new history, never a mix.
- ``consistent_offset`` is the end of the longest prefix both histories vouch for: the newest
  epoch both hold with the same start, cut at the earlier of the two ends of that epoch. A
  replica truncates its log there and copies the rest from the master.
- A malformed file is an error naming the file, never silently reset (that would forget
  which bytes a deposed master wrote).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

EPOCH_FILE = "epochs.json"


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


# What a replica that never saw a master change holds: epoch 0 from the log's start (static
# mode stays there for good).
FIRST_EPOCH = EpochEntry(0, 0)


class EpochHistoryError(ValueError):
    """The epoch file is unreadable or its entries are out of order."""


def check_entries(entries: Sequence[EpochEntry]) -> None:
    """Epochs strictly increase, start offsets never decrease and are never negative."""
    if any(entry.epoch < 0 or entry.start_offset < 0 for entry in entries):
        raise EpochHistoryError("an epoch entry is negative")
    for before, after in itertools.pairwise(entries):
        if after.epoch <= before.epoch or after.start_offset < before.start_offset:
            raise EpochHistoryError(f"epoch entries out of order: {before} then {after}")


class EpochHistory:
    def __init__(self, path: str, entries: Sequence[EpochEntry] = ()) -> None:
        check_entries(entries)
        self.path = path
        self.entries: list[EpochEntry] = list(entries)

    @classmethod
    def load(cls, directory: str) -> EpochHistory:
        """The history in ``directory``: epoch 0 from offset 0 when there is no file yet."""
        path = os.path.join(directory, EPOCH_FILE)
        try:
            with open(path) as handle:
                document = json.load(handle)
                entries = [EpochEntry(int(e), int(o)) for e, o in document["entries"]]
        except FileNotFoundError:
            return cls(path, [FIRST_EPOCH])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise EpochHistoryError(f"{path} is unreadable or malformed: {error}") from None
        try:
            if not entries:
                raise EpochHistoryError("it lists no epoch")
            return cls(path, entries)
        except EpochHistoryError as error:
            raise EpochHistoryError(f"{path}: {error}") from None

    def _save(self) -> None:
        temporary = self.path + ".tmp"
        with open(temporary, "w") as handle:
            json.dump({"entries": [[e.epoch, e.start_offset] for e in self.entries]}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        directory = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def begin(self, epoch: int, start_offset: int) -> None:
        """This replica holds bytes of ``epoch`` from ``start_offset`` on (a new master's
        first write, or a slave copying a new master's first bytes). Idempotent."""
        if self.entries and self.entries[-1].epoch == epoch:
            return
        entry = EpochEntry(epoch, start_offset)
        check_entries([*self.entries[-1:], entry])
        self.entries.append(entry)
        self._save()

    def truncate(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: forget epochs that start past it."""
        kept = [e for e in self.entries if e.start_offset < end_offset or e is self.entries[0]]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def replace(self, entries: Sequence[EpochEntry]) -> None:
        check_entries(entries)
        self.entries = list(entries)
        self._save()


def consistent_offset(
    ours: Sequence[EpochEntry], our_end: int, theirs: Sequence[EpochEntry], their_end: int
) -> int:
    """Where the two logs stop agreeing: see the module docstring. 0 when they share no
    epoch (the replica copies everything)."""
    their_index = {entry.epoch: index for index, entry in enumerate(theirs)}
    for index in range(len(ours) - 1, -1, -1):
        entry = ours[index]
        match = their_index.get(entry.epoch)
        if match is None or theirs[match].start_offset != entry.start_offset:
            continue
        our_stop = ours[index + 1].start_offset if index + 1 < len(ours) else our_end
        their_stop = theirs[match + 1].start_offset if match + 1 < len(theirs) else their_end
        return min(our_stop, their_stop)
    return 0
