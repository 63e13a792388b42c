"""ReadyHandler: what a member does with each Raft ``Ready`` -- the one implementation, run by
the node's Raft loop (replica.py) and by the deterministic simulation (tests/sim) alike.

One Ready, in this order (the contract in raftlog.raft.types):
1. a role change goes to the listener first (a lost leadership fails the writes not yet
   proposed before anything of the new term happens);
2. a leader sends its APPENDs and HEARTBEATs at once (thesis §10.2.1): followers write in
   parallel with the leader, and the leader counts its own copy only once it is durable,
   which this loop guarantees because nothing is stepped before the Ready is done;
3. a staged snapshot is installed (the store swaps in the leader's segments, and its topics,
   offsets and access rules for the leader's: snapshot_install.py);
4. entries are appended BEFORE the hard state: the Ready's commit index may already cover
   entries that replace a conflicting uncommitted tail in this same Ready, and the log
   refuses to truncate at or below the commit index it holds (etcd's WAL does the same);
5. one sync when the core asks (``must_sync``): entries, then a changed term or vote -- a vote
   is durable before the message granting it leaves, and an acknowledged entry before its ack;
6. the other messages go;
7. committed entries are applied: control records (topics, consumer offsets, producer
   sequences, the delay scheduler's progress) in log order, then the store dispatches up to
   the end of the last one, so readers never see an uncommitted byte; the listener hears of
   them (futures resolve);
8. ``advance``, then the listener's ``advanced`` (read-index answers, write readiness).

A full disk (the Raft log's append refused with DiskFullError, nothing of it written) is not
fatal: the Ready is done without its entries (``_cut_to_log``). The core keeps them unstable
and hands them out again with the next Ready, which retries the append (``drain`` stops after
a refused one, so the loop retries at its own pace); the commit index persisted and the
entries applied stop at the log this member holds; acknowledgements of entries it does not
hold are not sent. So nothing unwritten is acknowledged, by a follower (no ack) or a leader
(no apply, so no answer), and no election follows: heartbeats and their answers still flow.
``disk_full`` holds the refusal until an append succeeds; a leader refuses new writes with
it meanwhile (proposals.py).

Rules this module keeps: single-threaded and clock-free (no ``time``, no threads, no gRPC):
everything that waits or times out is the listener's; the file system is the seam given to
it (``OsFileSystem`` in a node, ``SimFileSystem`` in the simulation), and messages leave
through a ``Transport``. ``planted_bugs`` exists only so tests/sim can prove that its checkers
find a broken handler (planted_bugs.py); a node never sets it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from raftlog.node.control import (
    ControlCommand,
    ProduceMarker,
    ScheduleProgress,
    apply_to_store,
    control_command_of,
)
from raftlog.node.messaging.schedule_table import ScheduleTable, store_offsets
from raftlog.node.replication.applied_state import AppliedState
from raftlog.node.replication.planted_bugs import NodePlantedBug
from raftlog.node.replication.producer_table import ProducerTable
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.snapshot_install import install_snapshot
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import Entry, EntryType, Message, MessageType, Ready, Role, SnapshotMeta
from raftlog.store.errors import DiskFullError, StoreError
from raftlog.store.filesystem import FileSystem
from raftlog.store.message_store import MessageStore

_log = logging.getLogger(__name__)

# Messages a leader may send before its own copy of the entries is durable (§10.2.1).
_EARLY_TYPES = frozenset((MessageType.APPEND, MessageType.HEARTBEAT))


class Transport(Protocol):
    """Where outgoing Raft messages go (the peer transport; the simulated network)."""

    def send(self, messages: Sequence[Message]) -> None: ...


class ReadyListener(Protocol):
    """What the owner of the handler (the replica; the simulation) hears, in Ready order."""

    def role_changed(self, ready: Ready) -> None:
        """The Ready carries a soft state (role or leader changed); nothing else done yet."""

    def applied(self, entries: Sequence[Entry]) -> None:
        """``entries`` (possibly none, after a snapshot install) are applied and visible."""

    def advanced(self, ready: Ready) -> None:
        """The Ready is done (``advance`` called); ``ready.read_states`` are answerable."""


@dataclass(frozen=True, slots=True)
class ReadySettings:
    fsync_before_ack: bool = True
    # Where a follower's snapshot segments are staged before the install.
    staging_dir: str = ""
    # Idempotent producers idle longer than this (in log time) are forgotten.
    producer_retention_ms: int = 15 * 60 * 1000
    planted_bugs: frozenset[NodePlantedBug] = frozenset()


class ReadyHandler:
    """Handles every Ready of ``node``: persists through ``raft_log``, sends through
    ``transport``, applies to ``store`` and ``producers``, reports to ``listener``."""

    def __init__(
        self,
        node: RawNode,
        raft_log: RaftLogStorage,
        store: MessageStore,
        fs: FileSystem,
        transport: Transport,
        listener: ReadyListener,
        settings: ReadySettings,
    ) -> None:
        self._node = node
        self._raft_log = raft_log
        self._store = store
        self._fs = fs
        self._transport = transport
        self._listener = listener
        self._settings = settings
        self.producers = ProducerTable(settings.producer_retention_ms)
        # The delay scheduler's progress, applied with the copies it delivered.
        self.schedule = ScheduleTable()
        # The last Ready's entries could not be written (the disk is full): the refusal.
        self.disk_full: DiskFullError | None = None
        self.applied_index = raft_log.first_index() - 1
        # The store's dispatch bound: the end of the last applied entry.
        self.visible_end = 0
        # Follower: the snapshot whose segments are staged, and where they end.
        self.staged_snapshot: tuple[int, int] | None = None

    def capture(self) -> AppliedState:
        """The applied-state checkpoint as of now (between Readies): applied_state.py."""
        index = self.applied_index
        return AppliedState(
            index,
            self._raft_log.term(index),
            self._node.conf_state,
            self.producers.export(),
            self.schedule.export(),
        )

    def restore(self, state: AppliedState) -> None:
        """Start from a checkpoint instead of the snapshot point (before any Ready): the core
        was built with its applied index and membership; the tables and the dispatch bound
        follow here (the store dispatches up to it when the loop starts). ValueError when a
        table in it is malformed (``applied_state.usable`` checks them first)."""
        self.producers.restore(state.producers)
        self.schedule.restore(state.schedule)
        self.applied_index = state.index
        self.visible_end = (
            self._raft_log.placement(state.index).end_physical_offset
            if state.index >= self._raft_log.first_index()
            else self._raft_log.snapshot_end_physical_offset  # the snapshot point itself
        )

    def drain(self) -> None:
        """Handle Readies until the core has none, or one could not write its entries (the
        disk is full: the next ``drain`` retries them)."""
        node = self._node
        while node.has_ready():
            self.handle(node.ready())
            if self.disk_full is not None:
                return

    def handle(self, ready: Ready) -> Ready:
        """Steps 1-8 of the module docstring for one Ready. Returns the Ready as it was done:
        ``ready``, or without the entries the disk refused (``_cut_to_log``)."""
        if ready.soft_state is not None:
            self._listener.role_changed(ready)
        messages = ready.messages
        if NodePlantedBug.SEND_BEFORE_PERSIST in self._settings.planted_bugs:
            self._send(messages)
            messages = []
        elif self._node.role is Role.LEADER and messages:
            self._send([m for m in messages if m.type in _EARLY_TYPES])
            messages = [m for m in messages if m.type not in _EARLY_TYPES]
        if ready.snapshot is not None:
            self._install_snapshot(ready.snapshot)
        done = self._persist(ready)
        if done is not ready:
            held = self._raft_log.last_index()
            messages = [m for m in messages if not _acknowledges_past(m, held)]
        self._send(messages)
        applying = done.committed_entries
        if NodePlantedBug.APPLY_BEFORE_COMMIT in self._settings.planted_bugs:
            applying = _next_after(self.applied_index, [*done.committed_entries, *done.entries])
        if applying:
            self._apply(applying)
        self._node.advance(done)
        self._listener.advanced(done)
        return done

    def _send(self, messages: Sequence[Message]) -> None:
        if messages:
            self._transport.send(messages)

    def _persist(self, ready: Ready) -> Ready:
        """Steps 4 and 5; returns ``ready``, or what of it was done when the disk refused its
        entries (``disk_full`` says which)."""
        raft_log = self._raft_log
        done = ready
        if not ready.entries:
            self.disk_full = None  # nothing waits to be written (any more)
        else:
            try:
                raft_log.append(ready.entries)
            except DiskFullError as error:
                if self.disk_full is None:
                    _log.warning(
                        "the raft log cannot be written, entries %d..%d wait: %s",
                        ready.entries[0].index,
                        ready.entries[-1].index,
                        error,
                    )
                self.disk_full = error
                done = _cut_to_log(ready, raft_log.last_index())
            else:
                if self.disk_full is not None:
                    _log.warning("the raft log is written again (space was freed)")
                self.disk_full = None
        if done.hard_state is not None:
            raft_log.set_hard_state(done.hard_state)
        if done.must_sync:
            raft_log.sync(flush_entries=self._settings.fsync_before_ack)
        return done

    def _install_snapshot(self, meta: SnapshotMeta) -> None:
        staged = self.staged_snapshot
        if staged is None or staged[0] != meta.index:
            raise AssertionError(f"snapshot {meta.index} reached Ready without staged segments")
        end = staged[1]
        install_snapshot(
            self._fs, self._store, self._raft_log, self._settings.staging_dir, meta, end
        )
        self.staged_snapshot = None
        self.applied_index = meta.index
        self.visible_end = end
        self._store.dispatch(end)
        _log.info(
            "installed snapshot %d (term %d), log continues at %d", meta.index, meta.term, end
        )
        self._listener.applied(())

    def _apply(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.type is EntryType.NORMAL and entry.data:
                command = control_command_of(entry.data)
                if command is not None:
                    self._apply_control(entry, *command)
        last_index = entries[-1].index
        self.applied_index = last_index
        self.visible_end = self._raft_log.placement(last_index).end_physical_offset
        self._store.dispatch(self.visible_end)
        self._listener.applied(entries)

    def _apply_control(self, entry: Entry, command: ControlCommand, timestamp_ms: int) -> None:
        try:
            if isinstance(command, ProduceMarker):
                self.producers.apply(
                    command.producer_id, command.sequence, (entry.index, entry.term), timestamp_ms
                )
            elif isinstance(command, ScheduleProgress):
                self.schedule.apply(command)
                apply_to_store(self._store, store_offsets(command))
            else:
                apply_to_store(self._store, command)
        except StoreError as error:
            # The leader validated it; a replica that disagrees logs it (same on every replica).
            _log.warning("control command at index %d not applied: %s", entry.index, error)


def _cut_to_log(ready: Ready, last_index: int) -> Ready:
    """``ready`` as a member whose log ends at ``last_index`` can do it: without its entries
    (the core hands them out again), with the commit index and the committed entries cut
    there (a durable commit index never points past the durable log)."""
    hard_state = ready.hard_state
    if hard_state is not None and hard_state.commit > last_index:
        hard_state = replace(hard_state, commit=last_index)
    return replace(
        ready,
        entries=[],
        hard_state=hard_state,
        committed_entries=[e for e in ready.committed_entries if e.index <= last_index],
    )


def _acknowledges_past(message: Message, last_index: int) -> bool:
    """Whether ``message`` tells the leader this member holds entries past ``last_index``."""
    return (
        message.type is MessageType.APPEND_RESP
        and not message.reject
        and message.log_index > last_index
    )


def _next_after(applied_index: int, entries: Sequence[Entry]) -> list[Entry]:
    """The run of ``entries`` that continues from ``applied_index`` (the planted bug's apply
    list: indexes it already applied are skipped)."""
    run: list[Entry] = []
    for entry in entries:
        if entry.index == applied_index + 1 + len(run):
            run.append(entry)
    return run
