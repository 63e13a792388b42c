"""The driver of one simulated node: a RawNode, its disk, its state machine, its lives.

Rules this module keeps:
- Each Ready is handled exactly as raftlog.raft.types documents: persist (hard state, snapshot,
  entries; sync when ``must_sync``) -> send -> apply -> ``advance``. The hooks let the cluster
  see each step (checkers, network) without the driver knowing about them.
- The state machine is the applied entry sequence. It is volatile: a restart rebuilds it from
  the disk's snapshot image, and the new RawNode is told ``applied_index`` = that point.
- The driver checks the core's side of the contract it relies on (contiguous applies, a
  snapshot it actually received, a bounded Ready loop) and raises ``ContractViolation``.
"""

from __future__ import annotations

import random
from typing import Protocol

from raftlog.raft.config import Config
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import Entry, Message, NodeId, Ready

from .disk import SimDisk

READY_ROUNDS_MAX = 64
"""A node that still has a Ready after this many hand-offs in a row is spinning."""


class ContractViolation(Exception):
    """The core broke the Ready/LogStorage contract the driver relies on."""


class ReadyHooks(Protocol):
    def persisted(self, driver: NodeDriver, ready: Ready) -> None: ...

    def crash_before_send(self, driver: NodeDriver, ready: Ready) -> bool:
        """True: the node loses power between persisting this Ready and sending it."""
        ...

    def send(self, driver: NodeDriver, message: Message) -> None: ...

    def applied(self, driver: NodeDriver, entry: Entry) -> None: ...


class NodeDriver:
    def __init__(self, node_id: NodeId, disk: SimDisk) -> None:
        self.node_id = node_id
        self.disk = disk
        self.node: RawNode | None = None
        self.incarnation = 0
        self.applied: list[Entry] = []
        """The state machine: entries 1..applied_index, in order."""
        self.staged_snapshots: dict[tuple[int, int], tuple[Entry, ...]] = {}
        """Snapshot data the transport delivered, by (index, term), awaiting the core's Ready."""

    @property
    def is_up(self) -> bool:
        return self.node is not None

    @property
    def applied_index(self) -> int:
        return len(self.applied)

    def start(self, config: Config, rng: random.Random) -> None:
        """A new life on the recovered disk; ``config.applied_index`` must be ``restored_index``."""
        assert self.node is None
        self.incarnation += 1
        self.applied = list(self.disk.current.image)
        self.node = RawNode(config, self.disk, rng)

    def restored_index(self) -> int:
        return self.disk.current.snapshot_index

    def crash(self, rng: random.Random, torn: bool) -> int:
        """Power loss: volatile state is gone, unsynced writes too (some, if torn, survive)."""
        assert self.node is not None
        self.node = None
        self.applied = []
        self.staged_snapshots.clear()
        return self.disk.crash(rng, torn)

    def drain_ready(self, hooks: ReadyHooks) -> None:
        node = self.node
        assert node is not None
        for _ in range(READY_ROUNDS_MAX):
            if not node.has_ready():
                return
            ready = node.ready()
            self._persist(ready)
            hooks.persisted(self, ready)
            if hooks.crash_before_send(self, ready):
                return
            for message in ready.messages:
                if message.source != self.node_id:
                    raise ContractViolation(f"{self.node_id} sends as {message.source}: {message}")
                hooks.send(self, message)
            if ready.snapshot is not None:
                self._restore_state_machine(hooks)
            for entry in ready.committed_entries:
                if entry.index != self.applied_index + 1:
                    raise ContractViolation(
                        f"{self.node_id} handed committed entry {entry.index} to apply after "
                        f"{self.applied_index}"
                    )
                self.applied.append(entry)
                hooks.applied(self, entry)
            node.advance(ready)
        raise ContractViolation(f"{self.node_id} still has a Ready after {READY_ROUNDS_MAX} rounds")

    def _persist(self, ready: Ready) -> None:
        # Log before hard state, as etcd's WAL does: a torn write that keeps a prefix of them
        # never leaves a commit index pointing past the stored log.
        if ready.snapshot is not None:
            meta = ready.snapshot
            image = self.staged_snapshots.pop((meta.index, meta.term), None)
            if image is None:
                raise ContractViolation(
                    f"{self.node_id} installs snapshot ({meta.index}, {meta.term}) "
                    "that the transport never delivered"
                )
            self.disk.apply_snapshot(meta, image)
        self.disk.append(ready.entries)
        if ready.hard_state is not None:
            self.disk.set_hard_state(ready.hard_state)
        if ready.must_sync:
            self.disk.sync()

    def _restore_state_machine(self, hooks: ReadyHooks) -> None:
        """The state machine becomes the snapshot's: what it already had must be a prefix."""
        image = self.disk.current.image
        if len(image) < self.applied_index:
            raise ContractViolation(
                f"{self.node_id} installs a snapshot at {len(image)} below applied "
                f"{self.applied_index}"
            )
        # Every image entry goes through the checker, so a snapshot that contradicts what this
        # node (or any node) applied before is caught as a state machine safety violation.
        self.applied = []
        for entry in image:
            self.applied.append(entry)
            hooks.applied(self, entry)
