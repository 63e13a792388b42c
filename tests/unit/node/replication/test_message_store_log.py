"""RaftLogStorage over a MessageStore's CommitLog (the node's arrangement): the store
dispatches only what the commit index covers, skips no-ops and conf changes, follows a
conflict truncation, and both reopen to the same state."""

from __future__ import annotations

from pathlib import Path

from raftlog.node.replication.raft_entry import ENTRY_ENVELOPES, envelope_size_bytes
from raftlog.node.replication.raft_index import next_entry_position
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.raft.types import ConfChange, ConfChangeType, Entry, EntryType
from raftlog.store.config import StoreConfig
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import MessageStore
from tests.unit.node.replication.entry_factory import payload_at, payload_size_bytes

TOPIC, QUEUE_ID = "orders", 1
SEGMENT_SIZE_BYTES = 4096
CONF = ConfChange(ConfChangeType.ADD_LEARNER, "d").encode()


class Node:
    """The pieces a node wires together: a store whose dispatch is capped at the commit
    index's end, and the Raft log over the store's CommitLog."""

    def __init__(self, root: Path) -> None:
        self.commit_index = 0
        # The store dispatches while it opens, before the Raft log exists: nothing yet.
        self.log: RaftLogStorage | None = None
        fs = OsFileSystem()
        config = StoreConfig(
            str(root),
            segment_size_bytes=SEGMENT_SIZE_BYTES,
            consume_queue_file_units=16,
            index_slot_count=64,
            index_entry_count=256,
        )
        self.store = MessageStore.open(
            config,
            fs,
            envelopes=ENTRY_ENVELOPES,
            dispatch_bound=self.dispatch_bound,
            housekeeping_interval_ms=None,
        )
        self.log = RaftLogStorage(
            fs, str(root), self.store.commit_log, truncate_commit_log=self.store.truncate_after
        )

    @property
    def raft_log(self) -> RaftLogStorage:
        assert self.log is not None
        return self.log

    def dispatch_bound(self) -> int:
        if self.log is None or self.commit_index < self.log.first_index():
            return 0
        return self.log.placement(self.commit_index).end_physical_offset

    def close(self) -> None:
        self.raft_log.close()
        self.store.close()


def entries_from(
    end_physical_offset: int, first_index: int, term: int, count: int, queue_offset: int
) -> list[Entry]:
    """Entries a leader whose log ends at ``end_physical_offset`` would propose: records with
    dense queue offsets, every fifth entry a no-op and the seventh a conf change."""
    entries = []
    for index in range(first_index, first_index + count):
        if index == 7:
            entry = Entry(index, term, EntryType.CONF_CHANGE, CONF)
            size = envelope_size_bytes(EntryType.CONF_CHANGE, len(CONF))
        else:
            bodies = [] if index % 5 == 0 else [b"%d-%d" % (term, index), b"x" * 300]
            size = envelope_size_bytes(EntryType.NORMAL, payload_size_bytes(bodies))
            position = next_entry_position(end_physical_offset, size, SEGMENT_SIZE_BYTES)
            entry = Entry(index, term, data=payload_at(position, bodies, queue_offset))
            queue_offset += len(bodies)
        entries.append(entry)
        end_physical_offset = next_entry_position(end_physical_offset, size, SEGMENT_SIZE_BYTES)
        end_physical_offset += size
    return entries


def bodies_visible(node: Node) -> list[bytes]:
    node.store.dispatch()
    result = node.store.get_messages(TOPIC, QUEUE_ID, 0, max_messages=1000)
    return [record.body for record in result if not record.body.startswith(b"x")]


def test_store_dispatches_committed_entries_only(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.store.create_topic(TOPIC, 4)
    node.raft_log.append(entries_from(0, 1, 1, 12, 0))
    node.raft_log.sync()
    node.commit_index = 6
    assert bodies_visible(node) == [b"1-1", b"1-2", b"1-3", b"1-4", b"1-6"]
    # A new leader replaces entries 9.. (never committed here); queue offsets continue from
    # what entries 1..8 hold.
    kept_records = 2 * sum(1 for index in range(1, 9) if index % 5 and index != 7)
    end_of_8 = node.raft_log.placement(8).end_physical_offset
    node.raft_log.append(entries_from(end_of_8, 9, 2, 6, kept_records))
    node.commit_index = node.raft_log.last_index()
    visible = bodies_visible(node)
    assert visible == [b"1-%d" % i for i in (1, 2, 3, 4, 6, 8)] + [
        b"2-%d" % i for i in (9, 11, 12, 13, 14)
    ]
    node.close()
    reopened = Node(tmp_path)
    reopened.commit_index = reopened.raft_log.last_index()
    assert bodies_visible(reopened) == visible
    assert reopened.raft_log.entries(7, 8, 0)[0].type is EntryType.CONF_CHANGE
    reopened.close()
