"""The driver of one simulated node: the node's own replication code -- RawNode, the shipping
``ReadyHandler`` (node/replication/ready.py), a real ``MessageStore`` and ``RaftLogStorage``
(the Raft log in the CommitLog) -- over a ``SimFileSystem`` that can lose power.

Rules this module keeps:
- Each Ready is handled by the handler the node runs, in the node's order (a leader's APPENDs
  early, entries before the hard state, one sync, the rest, apply through control records
  and the store's dispatch). The driver only observes: it is the handler's transport and
  listener, and its Raft log mirrors every write onto a shadow ``SimDisk`` (shadow_log.py)
  that the checkers read.
- A crash is a power loss of the node's SimFileSystem: unsynced bytes go (a random prefix
  may survive, torn). A restart opens the store and the Raft log from the surviving files
  (recovery runs for real), checks they kept everything they had synced, and starts a new
  RawNode on them. The state machine (entries applied, in order) is volatile: it restarts
  from the snapshot image and is rebuilt by replaying the committed log through apply.
- Proposals go through the node's stamping: a message encoded by the store, its entry's
  CommitLog position reserved (``plan_entry``) and its records stamped there, as a leader
  does; a new leader proposes only once it applied its first entry of its term.
- Fault points are faults of the I/O seams: the transport may declare the process dead after
  a send (``SimCrash``, raised through the handler), or lose everything sent from then on
  (the process dies before its send queue drains; the cluster crashes it after the call).
- The driver checks the core's side of the contract it relies on (contiguous applies, a
  snapshot it actually received, a bounded Ready loop) and raises ``ContractViolation``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from typing import Protocol

from raftlog.node.control import CONTROL_QUEUE_ID, CONTROL_TOPIC
from raftlog.node.errors import NodeError, NotLeaderError
from raftlog.node.replication.planted_bugs import NodePlantedBug
from raftlog.node.replication.proposals import Proposal, Proposals
from raftlog.node.replication.raft_entry import ENTRY_ENVELOPES
from raftlog.node.replication.ready import ReadyHandler, ReadySettings
from raftlog.node.replication.snapshot_install import resume_interrupted_install
from raftlog.raft.config import Config
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import (
    ConfState,
    Entry,
    Message,
    NodeId,
    ProposalDroppedError,
    Ready,
    Role,
    SnapshotMeta,
)
from raftlog.store.config import StoreConfig
from raftlog.store.message_store import COMMIT_LOG_DIR, MessageStore
from raftlog.store.message_store import Message as StoreMessage
from raftlog.store.segment import parse_segment_file_name
from tests.support.sim_filesystem import SimFileSystem

from .disk import SimDisk
from .network import SnapshotCopy
from .shadow_log import ShadowedRaftLogStorage, reset_shadow

READY_ROUNDS_MAX = 64
"""A node that still has a Ready after this many hand-offs in a row is spinning."""
SIM_TOPIC = "sim"
SEGMENT_SIZE_BYTES = 8 * 1024
"""Small segments, so runs roll segments and snapshots carry several files."""
STAGING_SUBDIR = "commitlog.incoming"


class ContractViolation(Exception):
    """The core broke the Ready/LogStorage contract the driver relies on."""


class SimCrash(Exception):
    """The simulated process died here; the cluster crashes the node at the call boundary."""


class DriverHooks(Protocol):
    def send(self, driver: NodeDriver, message: Message) -> None:
        """Put ``message`` on the network; may raise SimCrash (the process died after it)."""

    def persisted(self, driver: NodeDriver, ready: Ready) -> None: ...

    def applied(self, driver: NodeDriver, entry: Entry) -> None: ...


class NodeDriver:
    def __init__(self, node_id: NodeId, conf_state: ConfState, root_dir: str) -> None:
        self.node_id = node_id
        self.fs = SimFileSystem()
        self.disk = SimDisk(conf_state)
        """The shadow the checkers read: what the Raft log promised, current and synced."""
        self._conf_state = conf_state
        self._root = os.path.join(root_dir, node_id)
        os.makedirs(self._root, exist_ok=True)  # the store's lock file is a real one
        self.node: RawNode | None = None
        self.store: MessageStore | None = None
        self.raft_log: ShadowedRaftLogStorage | None = None
        self.handler: ReadyHandler | None = None
        self.proposals: Proposals | None = None
        self.incarnation = 0
        self.state_machine: list[Entry] = []
        """The state machine: entries 1..applied_index, in order."""
        self.staged_images: dict[tuple[int, int], tuple[Entry, ...]] = {}
        """The log prefix of each snapshot the transport staged, by (index, term)."""
        self.doomed = False
        """The process is dying: everything it sends from now on is lost."""
        self.planted_bugs: frozenset[NodePlantedBug] = frozenset()
        self._hooks: DriverHooks | None = None
        self._write_ready = False
        self._term_start_index = 0

    @property
    def is_up(self) -> bool:
        return self.node is not None

    @property
    def applied_index(self) -> int:
        return len(self.state_machine)

    @property
    def staging_dir(self) -> str:
        return os.path.join(self._root, STAGING_SUBDIR)

    # -- lives -----------------------------------------------------------------------------

    def start(
        self, config: Config, rng: random.Random, hooks: DriverHooks, now_ms: Callable[[], int]
    ) -> None:
        """A new life on the recovered files; ``config.applied_index`` must be
        ``restored_index()``."""
        assert self.node is None
        self.incarnation += 1
        self._hooks = hooks
        resume_interrupted_install(self.fs, self._root, self.staging_dir)
        store = MessageStore.open(
            StoreConfig(
                self._root,
                segment_size_bytes=SEGMENT_SIZE_BYTES,
                consume_queue_file_units=64,
                index_slot_count=64,
                index_entry_count=256,
            ),
            self.fs,
            now_ms=now_ms,
            store_host=("127.0.0.1", 7700 + int(self.node_id[1:])),
            envelopes=ENTRY_ENVELOPES,
            housekeeping_interval_ms=None,
        )
        store.create_topic(CONTROL_TOPIC, CONTROL_QUEUE_ID + 1)
        store.create_topic(SIM_TOPIC, 1)
        raft_log = ShadowedRaftLogStorage(
            self.fs,
            self._root,
            store.commit_log,
            bootstrap=self._conf_state,
            truncate_commit_log=store.truncate_after,
            planted_bugs=self.planted_bugs,
        )
        raft_log.attach_shadow(self.disk, self.staged_images)
        reset_shadow(self.node_id, self.disk, raft_log)
        self.store, self.raft_log = store, raft_log
        self.state_machine = list(self.disk.current.image)
        self.node = RawNode(config, raft_log, rng)
        self.handler = ReadyHandler(
            self.node,
            raft_log,
            store,
            self.fs,
            self,
            self,
            ReadySettings(staging_dir=self.staging_dir, planted_bugs=self.planted_bugs),
        )
        self.handler.applied_index = self.applied_index
        self.proposals = Proposals(
            self.node, raft_log, store, self.handler.producers, self._not_leader
        )
        self._write_ready = False
        self.doomed = False

    def release_lock(self) -> None:
        """Let go of the store's lock file, the one real file a node holds (its data is
        simulated): the OS drops a dead process's flock, and an abandoned store would hold the
        descriptor for the rest of the test process."""
        if self.store is not None:
            self.store._store_lock.release()

    def restored_index(self) -> int:
        return self.disk.current.snapshot_index

    def crash(self, rng: random.Random, torn: bool) -> None:
        """Power loss: volatile state is gone, unsynced bytes too (with ``torn``, a random
        prefix of them may survive, the last one cut). The shadow is reset to what the files
        recover to at the next start (shadow_log.reset_shadow)."""
        self.release_lock()
        self.node = self.store = self.raft_log = self.handler = self.proposals = None
        self.state_machine = []
        self.staged_images.clear()
        self.fs.power_loss(rng, torn)

    # -- snapshots (what the peer transport's segment transfer does) --------------------------

    def snapshot_copy(self, message: Message) -> SnapshotCopy | None:
        """The leader's side: its segment files up to the end of the snapshot's entry (from
        its first segment: the simulation deletes none), and the log prefix for the
        checkers. None when the snapshot is no longer in the log (the send fails)."""
        meta, raft_log, store = message.snapshot, self.raft_log, self.store
        assert meta is not None and raft_log is not None and store is not None
        end = raft_log.end_of_entry(meta.index, meta.term)
        image = tuple(self.disk.current.image[: meta.index])
        if end is None or len(image) != meta.index:
            return None
        directory = os.path.join(self._root, COMMIT_LOG_DIR)
        files = []
        for name in self.fs.listdir(directory):
            start = parse_segment_file_name(name)
            if start is not None and start < end:
                data = self.fs.read_bytes(os.path.join(directory, name))
                files.append((name, data[: end - start]))
        return SnapshotCopy(image, tuple(files), end)

    def stage_snapshot(self, meta: SnapshotMeta, copy: SnapshotCopy) -> None:
        """The follower's side: the segments written and synced into the staging directory
        before the core sees the SNAPSHOT (segment_installer.fetch_segments does this)."""
        handler = self.handler
        assert handler is not None
        staging = self.staging_dir
        self.fs.remove_tree(staging)
        self.fs.makedirs(staging)
        for name, data in copy.files:
            handle = self.fs.open(os.path.join(staging, name))
            handle.pwrite(data, 0)
            handle.sync()
            handle.close()
        self.fs.sync_dir(staging)
        handler.staged_snapshot = (meta.index, copy.end_physical_offset)
        self.staged_images[(meta.index, meta.term)] = copy.image

    # -- the Ready loop ----------------------------------------------------------------------

    def drain_ready(self) -> None:
        node, handler, hooks = self.node, self.handler, self._hooks
        assert node is not None and handler is not None and hooks is not None
        for _ in range(READY_ROUNDS_MAX):
            if not node.has_ready():
                return
            done = handler.handle(node.ready())
            hooks.persisted(self, done)
            if handler.disk_full is not None:
                return  # the entries wait for space: the next call retries them
        raise ContractViolation(f"{self.node_id} still has a Ready after {READY_ROUNDS_MAX} rounds")

    # -- Transport and ReadyListener (the handler's) -----------------------------------------

    def send(self, messages: Sequence[Message]) -> None:
        hooks = self._hooks
        assert hooks is not None
        for message in messages:
            if message.source != self.node_id:
                raise ContractViolation(f"{self.node_id} sends as {message.source}: {message}")
            if not self.doomed:
                hooks.send(self, message)

    def role_changed(self, ready: Ready) -> None:
        node = self.node
        assert ready.soft_state is not None and node is not None and self.raft_log is not None
        if ready.soft_state.role is Role.LEADER:
            self._term_start_index = next(
                (e.index for e in ready.entries if e.term == node.term),
                self.raft_log.last_index() + 1,
            )
        elif self.proposals is not None:
            self._write_ready = False
            self.proposals.lost_leadership()

    def applied(self, entries: Sequence[Entry]) -> None:
        hooks = self._hooks
        assert hooks is not None
        if not entries:
            self._restore_state_machine(hooks)
            return
        for entry in entries:
            if entry.index != self.applied_index + 1:
                raise ContractViolation(
                    f"{self.node_id} handed committed entry {entry.index} to apply after "
                    f"{self.applied_index}"
                )
            self.state_machine.append(entry)
            hooks.applied(self, entry)
        if self.proposals is not None:
            self.proposals.applied(entries)

    def advanced(self, ready: Ready) -> None:
        node, store = self.node, self.store
        assert node is not None and store is not None
        if (
            not self._write_ready
            and node.role is Role.LEADER
            and self.applied_index >= self._term_start_index
        ):
            store.reload_next_queue_offsets()  # as a node does once its inherited log applied
            self._write_ready = True

    def _restore_state_machine(self, hooks: DriverHooks) -> None:
        """A snapshot was installed: the state machine becomes its image, of which what it
        already had must be a prefix."""
        image = self.disk.current.image
        if len(image) < self.applied_index:
            raise ContractViolation(
                f"{self.node_id} installs a snapshot at {len(image)} below applied "
                f"{self.applied_index}"
            )
        # Every image entry goes through the checker, so a snapshot that contradicts what this
        # node (or any node) applied before is caught as a state machine safety violation.
        self.state_machine = []
        for entry in image:
            self.state_machine.append(entry)
            hooks.applied(self, entry)

    # -- client actions ----------------------------------------------------------------------

    def propose(self, body: bytes, now_ms: int) -> int:
        """Propose one message with ``body`` through the node's proposal path (encode, reserve
        the entry's position, stamp, propose); returns its index. ProposalDroppedError: not
        a leader, not write-ready yet, or the core refused it."""
        proposals, store = self.proposals, self.store
        assert proposals is not None and store is not None
        block, block_entries = store.encode_messages(
            [StoreMessage(SIM_TOPIC, 0, body, born_timestamp_ms=now_ms)]
        )
        proposal = Proposal(block, block_entries)
        proposals.queued.append(proposal)
        assert self.handler is not None
        proposals.propose_queued(self._write_ready, now_ms, self.handler.disk_full)
        if not self._write_ready:
            proposals.fail_unproposed(proposals.deferred)
            proposals.deferred = []
        error = proposal.future.exception(timeout=0) if proposal.future.done() else None
        if error is not None or not proposal.index:
            raise ProposalDroppedError(f"{self.node_id} did not take the write: {error}")
        return proposal.index

    def _not_leader(self) -> NodeError:
        node = self.node
        assert node is not None
        return NotLeaderError(node.leader, None, node.term)
