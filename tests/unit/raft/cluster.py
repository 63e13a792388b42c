"""A tiny in-memory harness for unit tests: RawNodes on MemoryStorage, a message pump that
does the Ready contract (persist -> send -> apply -> advance), partitions and drops by hand.
No sockets, no sleeps, no threads; one seeded rng per node."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from raftlog.raft import Config, MemoryStorage, RawNode
from raftlog.raft.types import (
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    NodeId,
    ReadState,
    Role,
)

MessageFilter = Callable[[Message], bool]
"""Returns True to deliver a message, False to drop it."""


class Cluster:
    def __init__(
        self,
        ids: Iterable[NodeId] = ("a", "b", "c"),
        *,
        learners: Iterable[NodeId] = (),
        seed: int = 1,
        log_terms: dict[NodeId, list[int]] | None = None,
        terms: dict[NodeId, int] | None = None,
        **config_fields: object,
    ) -> None:
        """``log_terms[n]`` preloads node n's stored log (one entry per term, from index 1);
        ``terms[n]`` its stored current term."""
        self.ids = tuple(sorted(ids))
        self.learner_ids = tuple(sorted(learners))
        self.seed = seed
        self.config_fields = config_fields
        self.storages: dict[NodeId, MemoryStorage] = {}
        self.nodes: dict[NodeId, RawNode] = {}
        self.applied: dict[NodeId, list[Entry]] = {}
        self.read_states: dict[NodeId, list[ReadState]] = {}
        self.queue: list[Message] = []
        self.delivered: list[Message] = []
        self.filters: list[MessageFilter] = []
        self.down: set[NodeId] = set()
        self.snapshot_data: dict[int, list[Entry]] = {}
        """Applied entries a snapshot stands for, by snapshot index (what a segment transfer
        would carry)."""
        for node_id in self.ids + self.learner_ids:
            self.add_node(
                node_id,
                ConfState(voters=self.ids, learners=self.learner_ids),
                log_terms=(log_terms or {}).get(node_id, []),
                term=(terms or {}).get(node_id, 0),
            )

    # --- membership of the harness ---------------------------------------------------------

    def config(self, node_id: NodeId, **overrides: object) -> Config:
        fields = {**self.config_fields, **overrides}
        return Config(node_id=node_id, **fields)  # type: ignore[arg-type]

    def add_node(
        self,
        node_id: NodeId,
        bootstrap: ConfState,
        *,
        log_terms: list[int] | None = None,
        term: int = 0,
        **overrides: object,
    ) -> None:
        storage = MemoryStorage(bootstrap)
        storage.append(
            [
                Entry(i, t, data=b"%s%d" % (node_id.encode(), i))
                for i, t in enumerate(log_terms or [], 1)
            ]
        )
        storage.set_hard_state(HardState(term=term))
        self.storages[node_id] = storage
        self.applied[node_id] = []
        self.read_states[node_id] = []
        rng = random.Random(f"{self.seed}:{node_id}")
        self.nodes[node_id] = RawNode(self.config(node_id, **overrides), storage, rng)

    def restart(self, node_id: NodeId, **overrides: object) -> None:
        """Crash and restart: in-flight Ready is lost, storage survives, applied is kept."""
        applied = self.applied[node_id]
        applied_index = applied[-1].index if applied else 0
        applied_index = max(applied_index, self.storages[node_id].snapshot().index)
        rng = random.Random(f"{self.seed}:{node_id}:restart")
        config = self.config(node_id, applied_index=applied_index, **overrides)
        self.nodes[node_id] = RawNode(config, self.storages[node_id], rng)

    # --- driving ---------------------------------------------------------------------------

    def handle_ready(self, node_id: NodeId) -> list[Message]:
        node = self.nodes[node_id]
        ready = node.ready()
        self.storages[node_id].persist(ready)
        if ready.snapshot is not None:
            # The snapshot's state replaces the applied state (a segment transfer in raftlog).
            self.applied[node_id] = list(self.snapshot_data[ready.snapshot.index])
        self.applied[node_id].extend(ready.committed_entries)
        self.read_states[node_id].extend(ready.read_states)
        node.advance(ready)
        return ready.messages

    def flush(self) -> None:
        """Handle every node's Ready until none has one; queue their messages."""
        for _ in range(100):
            busy = False
            for node_id in self.ids + self.extra_ids():
                if node_id in self.down:
                    continue
                if self.nodes[node_id].has_ready():
                    busy = True
                    self.queue.extend(self.handle_ready(node_id))
            if not busy:
                return
        raise AssertionError("Ready never settled")

    def extra_ids(self) -> tuple[NodeId, ...]:
        return tuple(sorted(set(self.nodes) - set(self.ids)))

    def deliverable(self, message: Message) -> bool:
        if message.source in self.down or message.target in self.down:
            return False
        if message.target not in self.nodes:
            return False
        return all(keep(message) for keep in self.filters)

    def pump(self, max_rounds: int = 1000, on_round: Callable[[], None] | None = None) -> None:
        """Flush and deliver until no message is left; ``on_round`` runs after each flush."""
        for _ in range(max_rounds):
            self.flush()
            if on_round is not None:
                on_round()
            if not self.queue:
                return
            batch, self.queue = self.queue, []
            for message in batch:
                if self.deliverable(message):
                    self.delivered.append(message)
                    self.nodes[message.target].step(message)
        raise AssertionError("messages never settled")

    def send(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.nodes[message.target].step(message)

    def tick(self, node_id: NodeId, ticks: int = 1) -> None:
        for _ in range(ticks):
            self.nodes[node_id].tick()

    def tick_all(self, ticks: int = 1) -> None:
        """Tick every live node, pumping messages after each tick."""
        for _ in range(ticks):
            for node_id in sorted(self.nodes):
                if node_id not in self.down:
                    self.nodes[node_id].tick()
            self.pump()

    def elect(self, node_id: NodeId) -> None:
        self.nodes[node_id].campaign()
        self.pump()
        assert self.nodes[node_id].role == Role.LEADER, self.nodes[node_id].status()

    def propose(self, node_id: NodeId, data: bytes) -> int:
        index = self.nodes[node_id].propose(data)
        self.pump()
        return index

    def compact(self, node_id: NodeId) -> int:
        """Compact node_id's stored log up to its applied index; returns that index."""
        status = self.nodes[node_id].status()
        self.storages[node_id].compact(status.applied_index, status.conf_state)
        self.snapshot_data[status.applied_index] = list(self.applied[node_id])
        return status.applied_index

    # --- partitions ------------------------------------------------------------------------

    def isolate(self, node_id: NodeId) -> None:
        self.filters.append(lambda m: node_id not in (m.source, m.target))

    def partition(self, *groups: Iterable[NodeId]) -> None:
        side = {node_id: index for index, group in enumerate(groups) for node_id in group}
        self.filters.append(lambda m: side.get(m.source) == side.get(m.target))

    def heal(self) -> None:
        self.filters = []

    # --- observing -------------------------------------------------------------------------

    def data_applied(self, node_id: NodeId) -> list[bytes]:
        return [e.data for e in self.applied[node_id] if e.type == EntryType.NORMAL and e.data]

    def log(self, node_id: NodeId) -> list[tuple[int, int]]:
        """(index, term) of every entry node_id has persisted."""
        storage = self.storages[node_id]
        return [
            (i, storage.term(i)) for i in range(storage.first_index(), storage.last_index() + 1)
        ]

    def leader_ids(self) -> list[NodeId]:
        return [n for n in sorted(self.nodes) if self.nodes[n].role == Role.LEADER]


class SafetyChecker:
    """Raft's safety properties over a Cluster, checked as often as the test likes."""

    def __init__(self) -> None:
        self.leader_by_term: dict[int, str] = {}
        self.committed: dict[int, Entry] = {}

    def check(self, cluster: Cluster) -> None:
        for node_id in sorted(cluster.nodes):
            node = cluster.nodes[node_id]
            if node.role == Role.LEADER:
                # Election safety: at most one leader per term.
                assert self.leader_by_term.setdefault(node.term, node_id) == node_id, (
                    node.term,
                    node_id,
                    self.leader_by_term[node.term],
                )
            # State machine safety: every applied entry is the one committed at that index.
            for entry in cluster.applied[node_id]:
                assert self.committed.setdefault(entry.index, entry) == entry, (node_id, entry)
            # Applied entries are contiguous (a snapshot may start them above 1).
            indexes = [e.index for e in cluster.applied[node_id]]
            assert indexes == list(range(indexes[0], indexes[0] + len(indexes)) if indexes else [])
