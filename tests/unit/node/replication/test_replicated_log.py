"""Three Raft cores, each with its own MessageStore and RaftLogStorage on a real directory and
the node's own Ready handler (node/replication/ready.py), wired by a plain in-memory pump (no
faults): the leader plans where each entry lands before proposing it, followers write what
they receive, one follower restarts midway, and in the end the three CommitLogs hold
byte-identical committed prefixes."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from pathlib import Path

from raftlog.node.replication.raft_entry import ENTRY_ENVELOPES
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.ready import ReadyHandler, ReadySettings
from raftlog.raft import Config, RawNode
from raftlog.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    Message,
    NodeId,
    Ready,
    Role,
)
from raftlog.store.config import StoreConfig
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import MessageStore
from raftlog.store.segment import parse_segment_file_name
from tests.unit.node.replication.entry_factory import payload_at, payload_size_bytes

IDS = ("a", "b", "c")
SEGMENT_SIZE_BYTES = 16 * 1024
ROUNDS = 30
ENTRIES_PER_ROUND = 10


class Replica:
    """One member: the handler's transport (``outbox``) and listener (``applied``)."""

    def __init__(self, node_id: NodeId, root: Path) -> None:
        self.node_id = node_id
        self.root = str(root / node_id)
        self.fs = OsFileSystem()
        self.state_machine: list[Entry] = []
        self.outbox: list[Message] = []
        self._open(Config(node_id), random.Random(node_id))

    def _open(self, config: Config, rng: random.Random) -> None:
        self.store = MessageStore.open(
            StoreConfig(self.root, segment_size_bytes=SEGMENT_SIZE_BYTES),
            self.fs,
            envelopes=ENTRY_ENVELOPES,
            housekeeping_interval_ms=None,
        )
        self.storage = RaftLogStorage(
            self.fs,
            self.root,
            self.store.commit_log,
            bootstrap=ConfState(voters=IDS),
            index_units_per_file=64,
            truncate_commit_log=self.store.truncate_after,
        )
        self.node = RawNode(config, self.storage, rng)
        self.handler = ReadyHandler(
            self.node, self.storage, self.store, self.fs, self, self, ReadySettings()
        )

    # Transport and ReadyListener
    def send(self, messages: Sequence[Message]) -> None:
        self.outbox.extend(messages)

    def role_changed(self, ready: Ready) -> None:
        pass

    def applied(self, entries: Sequence[Entry]) -> None:
        self.state_machine.extend(entries)

    def advanced(self, ready: Ready) -> None:
        pass

    def take_messages(self) -> list[Message]:
        """Handle every Ready; the messages they sent."""
        self.handler.drain()
        messages, self.outbox = self.outbox, []
        return messages

    def close(self) -> None:
        self.storage.close()
        self.store.close()

    def restart(self) -> None:
        """A clean restart: the store and the log reopened, the core rebuilt from them."""
        self.close()
        applied_index = self.state_machine[-1].index if self.state_machine else 0
        self._open(
            Config(self.node_id, applied_index=applied_index), random.Random(self.node_id + "2")
        )
        self.handler.applied_index = applied_index

    def committed_prefix_digest(self) -> str:
        """sha256 of the CommitLog bytes up to the end of the committed entry."""
        end = self.storage.placement(self.node.commit_index).end_physical_offset
        digest = hashlib.sha256()
        directory = f"{self.root}/commitlog"
        for name in self.fs.listdir(directory):
            start = parse_segment_file_name(name)
            if start is None or start >= end:
                continue
            data = Path(directory, name).read_bytes()
            digest.update(data[: end - start])
        return digest.hexdigest()


def pump(replicas: dict[NodeId, Replica]) -> None:
    """Handle Readies and deliver messages until everything settles."""
    for _ in range(1000):
        messages: list[Message] = []
        for node_id in IDS:
            messages.extend(replicas[node_id].take_messages())
        if not messages:
            return
        for message in messages:
            if message.target in replicas:  # "d" (a learner with no process) drops them
                replicas[message.target].node.step(message)
    raise AssertionError("the cluster never settled")


def propose_round(
    leader: Replica, queue_offset: int, rng: random.Random
) -> tuple[list[bytes], int]:
    """Plan each entry's position, stamp its records there (queue offsets dense from
    ``queue_offset``: the store dispatches them), propose them as one batch; returns them
    and the next queue offset."""
    data_items = []
    for _ in range(ENTRIES_PER_ROUND):
        bodies = [rng.randbytes(rng.randint(0, 700)) for _ in range(rng.randint(0, 4))]
        position = leader.storage.plan_entry(payload_size_bytes(bodies))
        data_items.append(payload_at(position, bodies, queue_offset=queue_offset))
        queue_offset += len(bodies)
    last_index = leader.node.propose_batch(data_items)
    assert last_index == leader.storage.last_index() + ENTRIES_PER_ROUND
    return data_items, queue_offset


def test_three_replicas_commit_byte_identical_logs(tmp_path: Path) -> None:
    replicas = {node_id: Replica(node_id, tmp_path) for node_id in IDS}
    leader = replicas["a"]
    leader.node.campaign()
    pump(replicas)
    assert leader.node.role is Role.LEADER
    rng = random.Random(7)
    proposed: list[bytes] = []
    queue_offset = 0
    for round_number in range(ROUNDS):
        data_items, queue_offset = propose_round(leader, queue_offset, rng)
        proposed.extend(data_items)
        if round_number == ROUNDS // 3:
            change = ConfChange(ConfChangeType.ADD_LEARNER, "d")
            leader.storage.plan_entry(len(change.encode()), EntryType.CONF_CHANGE)
            leader.node.propose_conf_change(change)
        if round_number == ROUNDS // 2:
            pump(replicas)
            replicas["c"].restart()
        pump(replicas)
    # A heartbeat carries the final commit index to the followers.
    for _ in range(Config("a").heartbeat_ticks):
        leader.node.tick()
    pump(replicas)

    commit_index = leader.node.commit_index
    assert commit_index >= ROUNDS * ENTRIES_PER_ROUND
    for replica in replicas.values():
        assert replica.node.commit_index == commit_index
        assert replica.storage.last_index() == commit_index
    digests = {replica.committed_prefix_digest() for replica in replicas.values()}
    assert len(digests) == 1
    assert len(leader.fs.listdir(f"{leader.root}/commitlog")) > 10  # many segment rolls
    normal_data = [
        entry.data
        for entry in leader.state_machine
        if entry.type is EntryType.NORMAL and entry.data
    ]
    assert normal_data == [data for data in proposed if data]
    assert [e.index for e in replicas["b"].state_machine] == [e.index for e in leader.state_machine]
    assert any(e.type is EntryType.CONF_CHANGE for e in leader.state_machine)
    # Every replica's records name their own physical offset, readable through the store.
    for replica in replicas.values():
        log = replica.storage.commit_log
        for physical_offset, _ in log.scan(0, log.max_offset):
            assert log.read_record(physical_offset).physical_offset == physical_offset
        replica.close()
