"""ReadyHandler: what a member does with each Raft ``Ready`` -- the one implementation, run by
the node's Raft loop (replica.py) and by the deterministic simulation (tests/sim) alike.

One Ready, in this order (the contract in raftlog.raft.types):
1. a role change goes to the listener first (a lost leadership fails the writes not yet
   proposed before anything of the new term happens);
2. a leader sends its APPENDs and HEARTBEATs at once (thesis §10.2.1): followers write in
   parallel with the leader, and the leader counts its own copy only once it is durable,
   which this loop guarantees because nothing is stepped before the Ready is done;
3. a staged snapshot is installed (the store swaps in the leader's segments);
4. entries are appended BEFORE the hard state: the Ready's commit index may already cover
   entries that replace a conflicting uncommitted tail in this same Ready, and the log
   refuses to truncate at or below the commit index it holds (etcd's WAL does the same);
5. one sync when the core asks (``must_sync``): entries, then a changed term or vote -- a vote
   is durable before the message granting it leaves, and an acknowledged entry before its ack;
6. the other messages go;
7. committed entries are applied: control records (topics, consumer offsets, producer
   sequences) in log order, then the store dispatches up to the end of the last one, so
   readers never see an uncommitted byte; the listener hears of them (futures resolve);
8. ``advance``, then the listener's ``advanced`` (read-index answers, write readiness).

Rules this module keeps: single-threaded and clock-free (no ``time``, no threads, no gRPC):
everything that waits or times out is the listener's; the file system is the seam given to
it (``OsFileSystem`` in a node, ``SimFileSystem`` in the simulation), and messages leave
through a ``Transport``. ``planted_bugs`` exists only so tests/sim can prove that its checkers
find a broken handler (planted_bugs.py); a node never sets it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from raftlog.node.control import (
    ControlCommand,
    ProduceMarker,
    apply_to_store,
    control_command_of,
)
from raftlog.node.replication.planted_bugs import NodePlantedBug
from raftlog.node.replication.producer_table import ProducerTable
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.snapshot_install import install_snapshot
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import Entry, EntryType, Message, MessageType, Ready, Role, SnapshotMeta
from raftlog.store.errors import StoreError
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
        self.applied_index = raft_log.first_index() - 1
        # The store's dispatch bound: the end of the last applied entry.
        self.visible_end = 0
        # Follower: the snapshot whose segments are staged, and where they end.
        self.staged_snapshot: tuple[int, int] | None = None

    def drain(self) -> None:
        """Handle Readies until the core has none."""
        node = self._node
        while node.has_ready():
            self.handle(node.ready())

    def handle(self, ready: Ready) -> None:
        """Steps 1-8 of the module docstring for one Ready."""
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
        self._persist(ready)
        self._send(messages)
        applying = ready.committed_entries
        if NodePlantedBug.APPLY_BEFORE_COMMIT in self._settings.planted_bugs:
            applying = _next_after(self.applied_index, [*ready.committed_entries, *ready.entries])
        if applying:
            self._apply(applying)
        self._node.advance(ready)
        self._listener.advanced(ready)

    def _send(self, messages: Sequence[Message]) -> None:
        if messages:
            self._transport.send(messages)

    def _persist(self, ready: Ready) -> None:
        raft_log = self._raft_log
        if ready.entries:
            raft_log.append(ready.entries)
        if ready.hard_state is not None:
            raft_log.set_hard_state(ready.hard_state)
        if ready.must_sync:
            raft_log.sync(flush_entries=self._settings.fsync_before_ack)

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
            else:
                apply_to_store(self._store, command)
        except StoreError as error:
            # The leader validated it; a replica that disagrees logs it (same on every replica).
            _log.warning("control command at index %d not applied: %s", entry.index, error)


def _next_after(applied_index: int, entries: Sequence[Entry]) -> list[Entry]:
    """The run of ``entries`` that continues from ``applied_index`` (the planted bug's apply
    list: indexes it already applied are skipped)."""
    run: list[Entry] = []
    for entry in entries:
        if entry.index == applied_index + 1 + len(run):
            run.append(entry)
    return run
