"""RaftLogStorage: the durable Raft log, stored in the CommitLog (DLedger's model), behind the
Raft core's ``LogStorage`` Protocol, with the writers a node's Ready loop calls.

Pieces (under one store root):
- the CommitLog (``<root>/commitlog``): every entry is an envelope item (raft_entry.py) whose
  payload is the message records it replicates; registered with ``ENTRY_ENVELOPES``;
- the Raft index (``<root>/raftindex``): entry -> (physical_offset, size, term) (raft_index.py);
- ``<root>/raftstate/hard_state``: term, vote, commit (hard_state_file.py);
- ``<root>/raftstate/snapshot_point``: the snapshot point (index, term, membership at that
  index, and the physical offset where the entry after it is placed from). This file is the
  membership store: ``initial_state()`` answers the membership at the snapshot point, and the
  core replays the CONF_CHANGE entries above it (raft_entry keeps them in the log), exactly as
  with MemoryStorage. A fresh log writes it with the bootstrap membership.

Semantics mirror MemoryStorage (raftlog.raft.memory_storage): the same appends, truncations,
compactions and snapshots give the same answers from ``entries``/``term``/``first_index``/
``last_index``, with the same LogCompactedError/LogUnavailableError.

Durability. ``append`` writes; ``sync`` makes the appended entries durable (one CommitLog
flush), then the hard state if its term or vote changed. So a durable commit index never
points past the durable log, and a vote is durable before ``sync`` returns (call it before
sending). Two writes are deferred on purpose, because recovery recomputes them:
- the commit index alone is written with the next term/vote change or at ``close`` (the core
  restarts from ``max(commit, applied_index)``, and a leader re-sends it), saving two fsyncs
  on every Ready of a follower;
- the index is synced every ``_INDEX_SYNC_INTERVAL_ENTRIES`` appended entries and at
  ``close``: it is derived data, recovery re-derives any unit the CommitLog does not confirm
  (see raft_index), and the interval bounds that work.
Truncations (conflicts, snapshots) are durable when they return. An ``append`` the disk refuses
(DiskFullError, or the OSError) appends none of its entries: what it wrote is cut back out of
the CommitLog and the index, so the log is as before (shorter by a stale tail it replaced).
Recovery: the CommitLog cuts its torn tail (the caller's ``recover``, or
``RaftLogStorage.open``); the index is then checked against it and rebuilt from the last good
unit; a hard state whose commit index lies past the recovered log is an error (durable
entries were lost), never papered over.

Byte-identical replicas. Where an entry's envelope lands is a pure function of the end of the
previous entry, the envelope's size and the segment size (``next_entry_position``); a blank
fills the rest of a segment deterministically. By Raft's log matching property, replicas that
hold entry ``i`` hold the same entries ``1..i``, so -- starting from the same snapshot point
(offset 0 for a fresh log) with the same segment size -- they place entry ``i`` at the same
physical offset with the same bytes. A conflicting tail is cut at the *end of the last kept
entry* (not at the start of the first dropped one, which may have rolled to a new segment), so
rewriting after a truncation follows the same placement as the leader's first write did.
Nested records name their physical offset; ``append`` refuses an entry whose records name any
other place, so a wrong plan never reaches the disk.

Position planning. A leader stamps physical offsets into the records of an entry *before*
proposing it, so it must know where the entry will land, counting entries proposed but not yet
persisted: ``plan_entry(payload_size_bytes)`` reserves the next position (after the persisted
log and every earlier reservation) and returns the envelope's offset; the payload's first
record goes ``ENTRY_HEADER_SIZE_BYTES`` after it. The node plans and proposes only after the
Ready that carries any entries the core appended itself (a new leader's no-op) was persisted,
and calls ``cancel_plans`` when a proposal is dropped or leadership is lost. Appends move the
plan along; a truncation or snapshot resets it.

Rules this module keeps: one writer thread (the node's Ready loop); entries are never
truncated at or below the commit index (an assertion); reads verify each envelope's CRC and
that its header matches the index.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from raftlog.node.replication.hard_state_file import (
    CorruptStateFileError,
    HardStateFile,
    read_checked_file,
    write_checked_file,
)
from raftlog.node.replication.planted_bugs import NodePlantedBug
from raftlog.node.replication.raft_entry import (
    ENTRY_ENVELOPES,
    decode_entry_header,
    entry_envelope_parts,
    envelope_size_bytes,
    envelope_to_entry,
    verify_entry,
)
from raftlog.node.replication.raft_index import (
    DEFAULT_UNITS_PER_FILE,
    IndexUnit,
    RaftIndex,
    next_entry_position,
)
from raftlog.raft.types import (
    ConfState,
    Entry,
    EntryType,
    HardState,
    LogCompactedError,
    LogUnavailableError,
    SnapshotMeta,
)
from raftlog.store.commit_log import CommitLog
from raftlog.store.errors import CorruptRecordError, StoreError
from raftlog.store.filesystem import FileSystem
from raftlog.store.message_store import COMMIT_LOG_DIR

RAFT_INDEX_DIR = "raftindex"
RAFT_STATE_DIR = "raftstate"
SNAPSHOT_POINT_FILE_NAME = "snapshot_point"
_SNAPSHOT_POINT_MAGIC = 0x534E5054  # "SNPT"
# Entries read back per index lookup, and bytes per CommitLog read: both bound the memory
# and the reading wasted when the core asks for a long range with a small byte limit.
_UNITS_PER_READ = 256
_READ_RUN_BYTES = 1 << 20
# Recovery re-derives at most about this many index units from the CommitLog after a crash.
_INDEX_SYNC_INTERVAL_ENTRIES = 1024
# The newest entries stay in memory up to this many payload bytes: a leader reads what it just
# appended twice (APPENDs to followers, then apply), and reading it back would cost a pread
# and a CRC check per entry on the Raft loop.
_RECENT_ENTRIES_MAX_BYTES = 32 << 20


@dataclass(frozen=True, slots=True)
class _SnapshotPoint:
    meta: SnapshotMeta
    # The end of the snapshot point's entry: where the next entry's placement starts from.
    end_physical_offset: int


def snapshot_point_path(root_dir: str) -> str:
    return os.path.join(root_dir, RAFT_STATE_DIR, SNAPSHOT_POINT_FILE_NAME)


def load_snapshot_point(fs: FileSystem, path: str) -> _SnapshotPoint | None:
    body = read_checked_file(fs, path, _SNAPSHOT_POINT_MAGIC)
    if body is None:
        return None
    try:
        fields = json.loads(body)
        return _SnapshotPoint(
            SnapshotMeta(
                int(fields["index"]),
                int(fields["term"]),
                ConfState(tuple(fields["voters"]), tuple(fields["learners"])),
            ),
            int(fields["end_physical_offset"]),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptStateFileError(f"{path}: {error}") from error


def save_snapshot_point(
    fs: FileSystem, path: str, meta: SnapshotMeta, end_physical_offset: int
) -> None:
    """Replace the snapshot point file atomically (CRC-checked)."""
    body = {
        "index": meta.index,
        "term": meta.term,
        "voters": list(meta.conf_state.voters),
        "learners": list(meta.conf_state.learners),
        "end_physical_offset": end_physical_offset,
    }
    write_checked_file(fs, path, _SNAPSHOT_POINT_MAGIC, json.dumps(body, sort_keys=True).encode())


def reset_log_to_snapshot(
    fs: FileSystem, root_dir: str, meta: SnapshotMeta, end_physical_offset: int
) -> None:
    """What ``apply_snapshot`` leaves on disk, done on a closed log (finishing an install a
    crash interrupted): the snapshot point says ``meta`` ending at ``end_physical_offset``,
    and the Raft index is empty (it restarts after ``meta.index``)."""
    fs.makedirs(os.path.join(root_dir, RAFT_STATE_DIR))
    save_snapshot_point(fs, snapshot_point_path(root_dir), meta, end_physical_offset)
    fs.remove_tree(os.path.join(root_dir, RAFT_INDEX_DIR))


class RaftLogStorage:
    def __init__(
        self,
        fs: FileSystem,
        root_dir: str,
        commit_log: CommitLog,
        *,
        bootstrap: ConfState | None = None,
        index_units_per_file: int = DEFAULT_UNITS_PER_FILE,
        truncate_commit_log: Callable[[int], None] | None = None,
        owns_commit_log: bool = False,
        planted_bugs: frozenset[NodePlantedBug] = frozenset(),
    ) -> None:
        """Open over a *recovered* ``commit_log`` that has ``ENTRY_ENVELOPES`` registered.
        ``bootstrap`` is the membership of a fresh log (ignored once the snapshot point file
        exists). ``truncate_commit_log`` cuts the CommitLog at a physical offset (default
        ``commit_log.truncate_after``; a node passes ``MessageStore.truncate_after`` so
        derived data follows). ``planted_bugs``: tests/sim only (planted_bugs.py)."""
        self._fs = fs
        self._planted_bugs = planted_bugs
        self._commit_log = commit_log
        self._owns_commit_log = owns_commit_log
        self._truncate_commit_log = truncate_commit_log or commit_log.truncate_after
        state_dir = os.path.join(root_dir, RAFT_STATE_DIR)
        self._hard_state_file = HardStateFile(fs, state_dir)
        self._hard_state = self._persisted_hard_state = self._hard_state_file.load()
        self._snapshot_point_path = snapshot_point_path(root_dir)
        point = self._load_snapshot_point()
        if point is None:
            point = _SnapshotPoint(
                SnapshotMeta(0, 0, bootstrap or ConfState(voters=())), commit_log.min_offset
            )
            self._save_snapshot_point(point)
        self._point = point
        # Below min_offset is allowed: retention may have deleted segments past the snapshot
        # point (reads of those entries raise LogCompactedError; see compact()).
        if point.end_physical_offset > commit_log.max_offset:
            raise CorruptStateFileError(
                f"the snapshot point places the next entry at {point.end_physical_offset}, "
                f"past the end of the commit log ({commit_log.max_offset})"
            )
        self._index = RaftIndex(
            fs, os.path.join(root_dir, RAFT_INDEX_DIR), point.meta.index + 1, index_units_per_file
        )
        self._index.recover(commit_log, point.end_physical_offset, point.meta.term)
        self._log_end_offset = point.end_physical_offset
        self._last_term = point.meta.term
        if self._index.last_index >= self._index.first_index:
            last = self._index.unit(self._index.last_index)
            self._log_end_offset, self._last_term = last.end_physical_offset, last.log_term
        if commit_log.max_offset > self._log_end_offset:
            # Only an end-of-segment blank can follow the last entry (index recovery walked
            # the rest): its entry was lost, and placement restarts from the entry's end.
            self._truncate_commit_log(self._log_end_offset)
        if self._hard_state.commit > self.last_index():
            raise CorruptStateFileError(
                f"commit index {self._hard_state.commit} is past the recovered log "
                f"(last index {self.last_index()}): durable entries were lost"
            )
        self._planned_end_offset = self._log_end_offset
        self._index_synced_through = self._index.last_index
        # The newest appended entries, consecutive from _recent_first (see entries()).
        self._recent: list[Entry] = []
        self._recent_first = 0
        self._recent_bytes = 0

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        root_dir: str,
        *,
        segment_size_bytes: int,
        bootstrap: ConfState | None = None,
        index_units_per_file: int = DEFAULT_UNITS_PER_FILE,
        max_open_segments: int = 64,
    ) -> RaftLogStorage:
        """A storage with its own CommitLog under ``root_dir``, recovered by verifying every
        item (a node embedding a MessageStore passes the store's recovered commit log to the
        constructor instead)."""
        commit_log = CommitLog(
            fs,
            os.path.join(root_dir, COMMIT_LOG_DIR),
            segment_size_bytes,
            max_open_segments,
            ENTRY_ENVELOPES,
        )
        try:
            commit_log.recover(commit_log.min_offset)
            return cls(
                fs,
                root_dir,
                commit_log,
                bootstrap=bootstrap,
                index_units_per_file=index_units_per_file,
                owns_commit_log=True,
            )
        except BaseException:
            commit_log.close()
            raise

    @property
    def commit_log(self) -> CommitLog:
        return self._commit_log

    # --- snapshot point file ---------------------------------------------------------------

    def _load_snapshot_point(self) -> _SnapshotPoint | None:
        return load_snapshot_point(self._fs, self._snapshot_point_path)

    def _save_snapshot_point(self, point: _SnapshotPoint) -> None:
        save_snapshot_point(
            self._fs, self._snapshot_point_path, point.meta, point.end_physical_offset
        )

    # --- LogStorage ------------------------------------------------------------------------

    def initial_state(self) -> tuple[HardState, ConfState]:
        return self._hard_state, self._point.meta.conf_state

    def first_index(self) -> int:
        return self._point.meta.index + 1

    def last_index(self) -> int:
        return self._index.last_index

    def snapshot(self) -> SnapshotMeta:
        return self._point.meta

    def term(self, index: int) -> int:
        snapshot_index = self._point.meta.index
        if index < snapshot_index:
            raise LogCompactedError(index)
        last_index = self._index.last_index
        if index > last_index:
            raise LogUnavailableError(index)
        if index == snapshot_index:
            return self._point.meta.term
        if index == last_index:
            return self._last_term
        return self._index.unit(index).log_term

    def entries(self, low: int, high: int, max_bytes: int) -> list[Entry]:
        if low <= self._point.meta.index:
            raise LogCompactedError(low)
        if high > self._index.last_index + 1:
            raise LogUnavailableError(high)
        found: list[Entry] = []
        total_bytes = 0
        recent_first = self._recent_first
        if recent_first <= low < high <= recent_first + len(self._recent):
            if self._index.unit(low).physical_offset < self._commit_log.min_offset:
                raise LogCompactedError(low)  # retention deleted its segment
            source: Iterable[Entry] = self._recent[low - recent_first : high - recent_first]
        else:
            source = self._read_entries(low, high)
        for entry in source:
            total_bytes += len(entry.data)
            if total_bytes > max_bytes and found:
                break
            found.append(entry)
        return found

    def _read_entries(self, low: int, high: int) -> Iterator[Entry]:
        for chunk_low in range(low, high, _UNITS_PER_READ):
            chunk_high = min(high, chunk_low + _UNITS_PER_READ)
            units = self._index.units(chunk_low, chunk_high)
            if units[0].physical_offset < self._commit_log.min_offset:
                raise LogCompactedError(chunk_low)  # retention deleted its segment
            # The caller stops pulling at its byte limit: runs are small so little is wasted.
            for start, stop in self._runs(units, _READ_RUN_BYTES):
                yield from self._read_run(chunk_low + start, units[start:stop])

    def _runs(self, units: Sequence[IndexUnit], max_run_bytes: int) -> Iterator[tuple[int, int]]:
        """``[start, stop)`` ranges of ``units`` whose envelopes lie back to back in one
        segment (one CommitLog read or append each), of at most ``max_run_bytes`` unless a
        single envelope is larger."""
        segment_size_bytes = self._commit_log.segment_size_bytes
        start = 0
        for position in range(1, len(units) + 1):
            if position < len(units):
                unit = units[position]
                if (
                    unit.physical_offset == units[position - 1].end_physical_offset
                    and unit.physical_offset % segment_size_bytes != 0
                    and unit.end_physical_offset - units[start].physical_offset <= max_run_bytes
                ):
                    continue
            yield start, position
            start = position

    def _read_run(self, first_index: int, units: Sequence[IndexUnit]) -> Iterator[Entry]:
        """Entries whose envelopes lie back to back (one read)."""
        start = units[0].physical_offset
        data = memoryview(self._commit_log.read(start, units[-1].end_physical_offset - start))
        for log_index, unit in enumerate(units, first_index):
            relative = unit.physical_offset - start
            view = data[relative : relative + unit.size_bytes]
            header = decode_entry_header(view)
            if not verify_entry(view) or (header.log_index, header.log_term) != (
                log_index,
                unit.log_term,
            ):
                raise CorruptRecordError(
                    f"entry {log_index} at physical offset {unit.physical_offset} fails its "
                    "check against its CRC or the raft index"
                )
            yield envelope_to_entry(view)

    # --- writers (the node, while handling a Ready) ----------------------------------------

    def set_hard_state(self, hard_state: HardState) -> None:
        """Takes effect at once for readers; durable at the next ``sync`` when term or vote
        changed, else at the next such change or ``close`` (see Durability)."""
        self._hard_state = hard_state

    def append(self, entries: Sequence[Entry]) -> None:
        """Append, replacing any stored entry at or after ``entries[0].index`` (Ready step 1).
        Durable at the next ``sync``. ValueError (nothing written) when an entry's records
        do not name the physical offsets the entry gets. Call it before ``set_hard_state`` of
        the same Ready: that commit index may cover the entries replacing a stale tail here,
        and replacing entries at or below the commit index held is refused. A write the disk
        refuses (DiskFullError, OSError) appends none of ``entries`` (``_write``); a stale
        tail it was to replace is gone by then, so the log ends before ``entries[0]``."""
        if not entries:
            return
        first_new_index = entries[0].index
        assert first_new_index <= self.last_index() + 1, "a hole in the log"
        snapshot_index = self._point.meta.index
        if first_new_index <= snapshot_index:
            # Everything up to the snapshot point is already covered by the snapshot.
            entries = entries[snapshot_index + 1 - first_new_index :]
            if not entries:
                return
            first_new_index = entries[0].index
        units, parts = self._encode(entries, self._end_before(first_new_index))
        if first_new_index <= self.last_index():
            self._truncate(first_new_index)
            kept = first_new_index - 1
            point = self._point.meta
            self._last_term = point.term if kept == point.index else self._index.unit(kept).log_term
        self._write(first_new_index, units, parts)
        self._remember(first_new_index, entries)
        last = entries[-1]
        self._last_term = last.term
        self._planned_end_offset = max(self._planned_end_offset, self._log_end_offset)

    def _remember(self, first_new_index: int, entries: Sequence[Entry]) -> None:
        """Keep ``entries`` (replacing any remembered from ``first_new_index`` on) in the
        in-memory tail, trimmed from the front to its byte budget."""
        recent = self._recent
        keep = first_new_index - self._recent_first
        if not 0 <= keep <= len(recent):
            self.forget_recent()
            self._recent_first = first_new_index
            keep = 0
        for dropped in recent[keep:]:
            self._recent_bytes -= len(dropped.data)
        del recent[keep:]
        recent.extend(entries)
        self._recent_bytes += sum(len(entry.data) for entry in entries)
        drop = 0
        while self._recent_bytes > _RECENT_ENTRIES_MAX_BYTES and drop < len(recent) - 1:
            self._recent_bytes -= len(recent[drop].data)
            drop += 1
        del recent[:drop]
        self._recent_first += drop

    def forget_recent(self) -> None:
        """Drop the in-memory entries (a cache: they are read back from the CommitLog)."""
        self._recent.clear()
        self._recent_bytes = 0

    def _end_before(self, log_index: int) -> int:
        """Where the placement of entry ``log_index`` starts: the end of entry ``log_index-1``."""
        if log_index - 1 == self._point.meta.index:
            return self._point.end_physical_offset
        return self._index.unit(log_index - 1).end_physical_offset

    def _encode(
        self, entries: Sequence[Entry], end_offset: int
    ) -> tuple[list[IndexUnit], list[tuple[bytes, bytes]]]:
        """Each entry's placement from ``end_offset`` and its envelope's (head, payload);
        nothing is written, so a refused entry leaves the log untouched."""
        segment_size_bytes = self._commit_log.segment_size_bytes
        units: list[IndexUnit] = []
        parts: list[tuple[bytes, bytes]] = []
        for expected_index, entry in enumerate(entries, entries[0].index):
            assert entry.index == expected_index, "entries must have consecutive indexes"
            size = envelope_size_bytes(entry.type, len(entry.data))
            position = next_entry_position(end_offset, size, segment_size_bytes)
            parts.append(entry_envelope_parts(entry, position))
            units.append(IndexUnit(position, size, entry.term))
            end_offset = position + size
        return units, parts

    def _truncate(self, first_dropped_index: int) -> None:
        """Drop entries from ``first_dropped_index`` on, durably: the index first (a crash in
        between leaves the longer CommitLog, which recovery re-indexes: the old log)."""
        assert first_dropped_index > self._hard_state.commit, (
            f"truncating from {first_dropped_index}, at or below commit index "
            f"{self._hard_state.commit}"
        )
        end_offset = self._end_before(first_dropped_index)
        self._index.truncate_from(first_dropped_index)
        self._index_synced_through = min(self._index_synced_through, first_dropped_index - 1)
        # Cut at the end of the last kept entry, not the first dropped one's start: that one
        # may have rolled to a new segment, and the rewrite must place from the same point.
        self._truncate_commit_log(end_offset)
        self._log_end_offset = self._planned_end_offset = end_offset

    def _write(
        self, first_index: int, units: Sequence[IndexUnit], parts: Sequence[tuple[bytes, bytes]]
    ) -> None:
        """Write placed envelopes with one CommitLog append per run of back-to-back ones, then
        their index units. All or nothing: when the disk refuses a run or the units, the runs
        already written are cut off again before the error is raised (the CommitLog and the
        index cut their own partial writes)."""
        try:
            for start, stop in self._runs(units, self._commit_log.segment_size_bytes):
                block = b"".join(part for pair in parts[start:stop] for part in pair)
                written = self._commit_log.append(block)
                assert written == units[start].physical_offset, (
                    f"the commit log wrote at {written}, the entry was placed at "
                    f"{units[start].physical_offset}"
                )
            self._index.append(first_index, units)
        except (StoreError, OSError):
            if self._commit_log.max_offset > self._log_end_offset:
                self._truncate_commit_log(self._log_end_offset)
            raise
        self._log_end_offset = units[-1].end_physical_offset

    def sync(self, flush_entries: bool = True) -> None:
        """Make everything appended durable, then a changed term or vote (see Durability).
        ``flush_entries=False`` (the node's "ack after a majority wrote" mode) skips the
        CommitLog fsync but still makes term and vote durable."""
        if flush_entries and NodePlantedBug.COMMIT_LOG_NOT_SYNCED not in self._planted_bugs:
            self._commit_log.flush()
        if self._index.last_index - self._index_synced_through >= _INDEX_SYNC_INTERVAL_ENTRIES:
            self._sync_index()
        persisted = self._persisted_hard_state
        if NodePlantedBug.VOTE_NOT_SYNCED in self._planted_bugs:
            persisted = HardState(persisted.term, self._hard_state.vote, persisted.commit)
        if (self._hard_state.term, self._hard_state.vote) != (persisted.term, persisted.vote):
            self._save_hard_state()

    def _sync_index(self) -> None:
        self._index.sync()
        self._index_synced_through = self._index.last_index

    def _save_hard_state(self) -> None:
        self._hard_state_file.save(self._hard_state)
        self._persisted_hard_state = self._hard_state

    def apply_snapshot(self, meta: SnapshotMeta, end_physical_offset: int | None = None) -> None:
        """Replace the log by the snapshot point ``meta`` (a follower installing one). The
        next entry is placed from ``end_physical_offset``: by default the end of entry
        ``meta.index`` when this log holds it with ``meta.term``; after a segment transfer,
        the caller passes where the transferred data ends (it must lie in the CommitLog).
        CommitLog bytes past that point are dropped. Durable when it returns."""
        if meta.index <= self._point.meta.index:
            return
        if end_physical_offset is None:
            if not (meta.index <= self.last_index() and self.term(meta.index) == meta.term):
                raise ValueError(
                    f"snapshot point {meta.index} (term {meta.term}) is not in this log: "
                    "install its segments first and pass end_physical_offset"
                )
            end_physical_offset = self._index.unit(meta.index).end_physical_offset
        commit_log = self._commit_log
        # Below min_offset is allowed (as after compact() and retention): the segment holding
        # the snapshot point's end was deleted, and the next entry starts the next segment.
        if end_physical_offset > commit_log.max_offset:
            raise ValueError(
                f"end_physical_offset {end_physical_offset} past the commit log's end "
                f"{commit_log.max_offset}"
            )
        self._index.reset(meta.index + 1)
        self._index_synced_through = meta.index
        self.forget_recent()
        if commit_log.min_offset <= end_physical_offset < commit_log.max_offset:
            self._truncate_commit_log(end_physical_offset)
        self._point = _SnapshotPoint(meta, end_physical_offset)
        self._save_snapshot_point(self._point)
        self._log_end_offset = self._planned_end_offset = end_physical_offset
        self._last_term = meta.term

    def compact(self, compact_index: int, conf_state: ConfState) -> None:
        """Make ``compact_index`` the snapshot point with membership ``conf_state`` (as
        MemoryStorage.compact) and forget index units up to it. The CommitLog bytes stay
        until the store's retention deletes their segments. Durable when it returns.

        Retention must not outrun compaction: the node compacts (at most up to its applied
        index, where ``RawNode.conf_state`` gives the membership) before the store's
        retention deletes the segments holding those entries, so the snapshot point never
        lies inside deleted segments; otherwise ``snapshot()`` would offer followers a point
        whose successors are gone."""
        if compact_index <= self._point.meta.index:
            return
        assert compact_index <= self.last_index(), "compacting beyond the log"
        unit = self._index.unit(compact_index)
        self._point = _SnapshotPoint(
            SnapshotMeta(compact_index, unit.log_term, conf_state), unit.end_physical_offset
        )
        # The snapshot point first: a crash before the index files go leaves units the next
        # open forgets anyway.
        self._save_snapshot_point(self._point)
        self._index.compact_to(compact_index + 1)

    # --- position planning (the leader, before proposing) ----------------------------------

    def next_physical_offset_for(
        self, payload_size_bytes: int, entry_type: EntryType = EntryType.NORMAL
    ) -> int:
        """Where the envelope of the next entry would land (after the persisted log and every
        reservation), without reserving it. The payload starts ``ENTRY_HEADER_SIZE_BYTES``
        later."""
        return next_entry_position(
            self._planned_end_offset,
            envelope_size_bytes(entry_type, payload_size_bytes),
            self._commit_log.segment_size_bytes,
        )

    def plan_entry(self, payload_size_bytes: int, entry_type: EntryType = EntryType.NORMAL) -> int:
        """Reserve the next position for an entry about to be proposed; returns its envelope's
        physical offset (see the module docstring for when to call it)."""
        position = self.next_physical_offset_for(payload_size_bytes, entry_type)
        self._planned_end_offset = position + envelope_size_bytes(entry_type, payload_size_bytes)
        return position

    def cancel_plans(self) -> None:
        """Forget every reservation not yet persisted (a dropped proposal, lost leadership)."""
        self._planned_end_offset = self._log_end_offset

    def placement(self, log_index: int) -> IndexUnit:
        """Where stored entry ``log_index`` lies: (physical_offset, size_bytes, log_term). The
        node turns its commit index into the store's dispatch bound with it (the committed
        entry's end)."""
        if not self.first_index() <= log_index <= self.last_index():
            raise IndexError(
                f"log index {log_index} outside [{self.first_index()}, {self.last_index()}]"
            )
        return self._index.unit(log_index)

    @property
    def snapshot_end_physical_offset(self) -> int:
        """Where the snapshot point's entry ends (the next entry is placed from here)."""
        return self._point.end_physical_offset

    def end_of_entry(self, log_index: int, log_term: int) -> int | None:
        """Where entry ``log_index`` ends if this log holds it with ``log_term`` (the snapshot
        point counts), else None."""
        point = self._point.meta
        if log_index == point.index:
            return self._point.end_physical_offset if log_term == point.term else None
        if not self.first_index() <= log_index <= self.last_index():
            return None
        unit = self._index.unit(log_index)
        return unit.end_physical_offset if unit.log_term == log_term else None

    def last_index_ending_by(self, physical_offset: int, at_most_index: int) -> int:
        """The highest index <= ``at_most_index`` whose entry ends at or before
        ``physical_offset`` (the snapshot point's index when none does): what compaction may
        cover before retention deletes the segments below ``physical_offset``."""
        low, high = self._point.meta.index, min(at_most_index, self.last_index())
        while low < high:
            middle = (low + high + 1) // 2
            if self._index.unit(middle).end_physical_offset <= physical_offset:
                low = middle
            else:
                high = middle - 1
        return low

    @property
    def log_end_physical_offset(self) -> int:
        """Where the persisted log ends (the last entry's end)."""
        return self._log_end_offset

    # --- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Sync, then close the index (and the CommitLog when this storage opened it)."""
        try:
            self.sync()
            self._sync_index()
            if self._hard_state != self._persisted_hard_state:
                self._save_hard_state()
        finally:
            self._index.close()
            if self._owns_commit_log:
                self._commit_log.close()
