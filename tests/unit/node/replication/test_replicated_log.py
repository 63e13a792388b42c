"""Three Raft cores, each persisting through its own RaftLogStorage on a real directory,
driven by a plain in-memory pump (no faults): the leader plans where each entry lands before
proposing it, followers write what they receive, one follower restarts midway, and in the end
the three CommitLogs hold byte-identical committed prefixes."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.raft import Config, RawNode
from raftlog.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    Message,
    NodeId,
    Role,
)
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.segment import parse_segment_file_name
from tests.unit.node.replication.entry_factory import payload_at, payload_size_bytes

IDS = ("a", "b", "c")
SEGMENT_SIZE_BYTES = 16 * 1024
ROUNDS = 30
ENTRIES_PER_ROUND = 10


class Replica:
    def __init__(self, node_id: NodeId, root: Path) -> None:
        self.node_id = node_id
        self.root = str(root / node_id)
        self.fs = OsFileSystem()
        self.applied: list[Entry] = []
        self.storage = self._open_storage()
        self.node = RawNode(Config(node_id), self.storage, random.Random(node_id))

    def _open_storage(self) -> RaftLogStorage:
        return RaftLogStorage.open(
            self.fs,
            self.root,
            segment_size_bytes=SEGMENT_SIZE_BYTES,
            bootstrap=ConfState(voters=IDS),
            index_units_per_file=64,
        )

    def handle_ready(self) -> list[Message]:
        """The Ready contract: persist (sync when asked), send, apply, advance."""
        ready = self.node.ready()
        assert ready.snapshot is None
        self.storage.append(ready.entries)
        if ready.hard_state is not None:
            self.storage.set_hard_state(ready.hard_state)
        if ready.must_sync:
            self.storage.sync()
        self.applied.extend(ready.committed_entries)
        self.node.advance(ready)
        return ready.messages

    def restart(self) -> None:
        """A clean restart: the storage is reopened and the core rebuilt from it."""
        self.storage.close()
        self.storage = self._open_storage()
        applied_index = self.applied[-1].index if self.applied else 0
        config = Config(self.node_id, applied_index=applied_index)
        self.node = RawNode(config, self.storage, random.Random(self.node_id + "2"))

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
            replica = replicas[node_id]
            while replica.node.has_ready():
                messages.extend(replica.handle_ready())
        if not messages:
            return
        for message in messages:
            if message.target in replicas:  # "d" (a learner with no process) drops them
                replicas[message.target].node.step(message)
    raise AssertionError("the cluster never settled")


def propose_round(leader: Replica, round_number: int, rng: random.Random) -> list[bytes]:
    """Plan each entry's position, stamp its records there, propose them as one batch."""
    data_items = []
    for _ in range(ENTRIES_PER_ROUND):
        bodies = [rng.randbytes(rng.randint(0, 700)) for _ in range(rng.randint(0, 4))]
        position = leader.storage.plan_entry(payload_size_bytes(bodies))
        data_items.append(payload_at(position, bodies, queue_offset=round_number))
    last_index = leader.node.propose_batch(data_items)
    assert last_index == leader.storage.last_index() + ENTRIES_PER_ROUND
    return data_items


def test_three_replicas_commit_byte_identical_logs(tmp_path: Path) -> None:
    replicas = {node_id: Replica(node_id, tmp_path) for node_id in IDS}
    leader = replicas["a"]
    leader.node.campaign()
    pump(replicas)
    assert leader.node.role is Role.LEADER
    rng = random.Random(7)
    proposed: list[bytes] = []
    for round_number in range(ROUNDS):
        proposed.extend(propose_round(leader, round_number, rng))
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
        entry.data for entry in leader.applied if entry.type is EntryType.NORMAL and entry.data
    ]
    assert normal_data == [data for data in proposed if data]
    assert [e.index for e in replicas["b"].applied] == [e.index for e in leader.applied]
    assert any(e.type is EntryType.CONF_CHANGE for e in leader.applied)
    # Every replica's records name their own physical offset, readable through the store.
    for replica in replicas.values():
        log = replica.storage.commit_log
        for physical_offset, _ in log.scan(0, log.max_offset):
            assert log.read_record(physical_offset).physical_offset == physical_offset
        replica.storage.close()
