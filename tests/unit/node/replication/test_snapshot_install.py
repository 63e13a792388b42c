"""A snapshot install replaces the follower's CommitLog by the leader's segments and its
replicated tables (topics, consumer offsets, access rules) by the leader's staged control
state; one that a crash interrupted is finished at the next start: the follower opens with
exactly the leader's segments and tables, derived data rebuilt, and its Raft log restarting
after the snapshot point. Without a staged control state (a leader that predates it) the
follower's own tables stay."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from raftlog.node.replication.raft_entry import ENTRY_ENVELOPES
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.snapshot_install import (
    CONTROL_STATE_FILE_NAME,
    MARKER_FILE_NAME,
    install_snapshot,
    resume_interrupted_install,
)
from raftlog.raft.types import ConfState, SnapshotMeta
from raftlog.store.atomic_file import write_json_document
from raftlog.store.config import StoreConfig
from raftlog.store.control_state import ControlState, encode_control_state
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import MessageStore
from tests.unit.node.replication.test_message_store_log import (
    QUEUE_ID,
    SEGMENT_SIZE_BYTES,
    TOPIC,
    Node,
    entries_from,
)

VOTERS = ConfState(voters=("a", "b", "c"))


def build(root: Path, term: int, count: int) -> tuple[int, int]:
    """A node dir with ``count`` committed entries of ``term``; returns (last index, end)."""
    node = Node(root)
    node.store.create_topic(TOPIC, 4)
    node.raft_log.append(entries_from(0, 1, term, count, 0))
    node.raft_log.sync()
    node.commit_index = node.raft_log.last_index()
    node.store.dispatch()
    last = node.raft_log.last_index()
    end = node.raft_log.placement(last).end_physical_offset
    node.close()
    return last, end


def messages(root: Path) -> list[bytes]:
    config = StoreConfig(
        str(root),
        segment_size_bytes=SEGMENT_SIZE_BYTES,
        consume_queue_file_units=16,
        index_slot_count=64,
        index_entry_count=256,
    )
    with MessageStore.open(
        config, OsFileSystem(), envelopes=ENTRY_ENVELOPES, housekeeping_interval_ms=None
    ) as store:
        store.dispatch()
        return [m.body for m in store.get_messages(TOPIC, QUEUE_ID, 0, 1000)]


LEADER_STATE = ControlState(
    topics={TOPIC: 8, "audit": 2},
    consumer_offsets={("billing", TOPIC, 1): 12, ("billing", "audit", 0): 3},
    access_rules={("alice", "orders*"): frozenset({"produce"})},
)


def open_store(root: Path) -> MessageStore:
    return MessageStore.open(
        StoreConfig(str(root), segment_size_bytes=SEGMENT_SIZE_BYTES),
        OsFileSystem(),
        envelopes=ENTRY_ENVELOPES,
        housekeeping_interval_ms=None,
    )


def give_stale_tables(root: Path) -> None:
    """The follower's own tables: a topic with fewer queues (4, the leader's has grown to 8),
    an older offset, a rule the leader's log revoked since, a topic the leader never had."""
    with open_store(root) as store:
        store.create_topic("local-only", 1)
        store.commit_consumer_offset("billing", TOPIC, 1, 4)
        store.access_rules.change("bob", TOPIC, ["consume"], revoke=False)


def stage(leader: Path, staging: Path, state: ControlState | None) -> list[str]:
    shutil.copytree(leader / "commitlog", staging)
    names = sorted(os.listdir(staging))
    if state is not None:
        (staging / CONTROL_STATE_FILE_NAME).write_bytes(encode_control_state(state))
    return names


def test_an_install_replaces_the_tables_by_the_staged_control_state(tmp_path: Path) -> None:
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    last, end = build(leader, term=2, count=30)
    build(follower, term=1, count=5)
    give_stale_tables(follower)
    staging = tmp_path / "staging"
    stage(leader, staging, LEADER_STATE)

    node = Node(follower)
    install_snapshot(
        OsFileSystem(), node.store, node.raft_log, str(staging), SnapshotMeta(last, 2, VOTERS), end
    )
    assert node.store.control_state() == LEADER_STATE
    assert node.raft_log.first_index() == last + 1
    node.close()
    assert not staging.exists()
    with open_store(follower) as store:
        assert store.control_state() == LEADER_STATE


def test_without_a_staged_control_state_the_tables_stay(tmp_path: Path) -> None:
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    last, end = build(leader, term=2, count=30)
    build(follower, term=1, count=5)
    give_stale_tables(follower)
    with open_store(follower) as store:
        before = store.control_state()
    staging = tmp_path / "staging"
    stage(leader, staging, None)

    node = Node(follower)
    install_snapshot(
        OsFileSystem(), node.store, node.raft_log, str(staging), SnapshotMeta(last, 2, VOTERS), end
    )
    assert node.store.control_state() == before
    assert node.raft_log.first_index() == last + 1
    node.close()


def messages_of(store: MessageStore) -> list[bytes]:
    store.dispatch()
    return [m.body for m in store.get_messages(TOPIC, QUEUE_ID, 0, 1000)]


def write_marker(
    staging: Path, meta: SnapshotMeta, end: int, names: list[str], control_state: bool | None
) -> None:
    """The marker install_snapshot writes (``control_state`` None: as written before the
    control state existed)."""
    fields: dict[str, object] = {
        "index": meta.index,
        "term": meta.term,
        "voters": list(meta.conf_state.voters),
        "learners": [],
        "end_physical_offset": end,
        "segments": names,
    }
    if control_state is not None:
        fields["control_state"] = control_state
    write_json_document(OsFileSystem(), str(staging / MARKER_FILE_NAME), 1, fields)


def test_an_interrupted_install_replaces_the_tables_at_the_next_start(tmp_path: Path) -> None:
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    last, end = build(leader, term=2, count=30)
    build(follower, term=1, count=5)
    give_stale_tables(follower)
    staging = tmp_path / "staging"
    names = stage(leader, staging, LEADER_STATE)
    write_marker(staging, SnapshotMeta(last, 2, VOTERS), end, names, control_state=True)

    assert resume_interrupted_install(OsFileSystem(), str(follower), str(staging))

    assert not staging.exists()
    with open_store(follower) as store:
        assert store.control_state() == LEADER_STATE
        assert messages_of(store) == messages(leader)


def test_a_marker_naming_a_control_state_that_is_not_staged_stops_the_start(
    tmp_path: Path,
) -> None:
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    last, end = build(leader, term=2, count=30)
    build(follower, term=1, count=5)
    staging = tmp_path / "staging"
    names = stage(leader, staging, None)
    write_marker(staging, SnapshotMeta(last, 2, VOTERS), end, names, control_state=True)
    with pytest.raises(ValueError, match="not staged"):
        resume_interrupted_install(OsFileSystem(), str(follower), str(staging))
    assert (staging / MARKER_FILE_NAME).exists()  # the next start tries again


def test_an_interrupted_install_is_finished_at_the_next_start(tmp_path: Path) -> None:
    """(A marker written before the control state existed: the tables stay.)"""
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    last, end = build(leader, term=2, count=30)
    build(follower, term=1, count=5)  # its own older log, to be replaced
    give_stale_tables(follower)
    with open_store(follower) as store:
        tables_before = store.control_state()
    staging = tmp_path / "staging"
    shutil.copytree(leader / "commitlog", staging)
    names = sorted(os.listdir(staging))
    assert len(names) > 2
    meta = SnapshotMeta(last, 2, VOTERS)
    write_json_document(
        OsFileSystem(),
        str(staging / MARKER_FILE_NAME),
        1,
        {
            "index": meta.index,
            "term": meta.term,
            "voters": list(VOTERS.voters),
            "learners": [],
            "end_physical_offset": end,
            "segments": names,
        },
    )
    # The crash came after one staged file had been moved in.
    os.replace(staging / names[0], follower / "commitlog" / names[0])

    assert resume_interrupted_install(OsFileSystem(), str(follower), str(staging))

    assert not staging.exists()
    assert sorted(os.listdir(follower / "commitlog")) == names
    for name in names:
        assert (follower / "commitlog" / name).read_bytes() == (
            leader / "commitlog" / name
        ).read_bytes()
    assert messages(follower) == messages(leader)
    store = MessageStore.open(
        StoreConfig(str(follower), segment_size_bytes=SEGMENT_SIZE_BYTES),
        OsFileSystem(),
        envelopes=ENTRY_ENVELOPES,
        housekeeping_interval_ms=None,
    )
    log = RaftLogStorage(OsFileSystem(), str(follower), store.commit_log)
    assert (log.snapshot().index, log.snapshot().term, log.first_index()) == (last, 2, last + 1)
    assert log.snapshot_end_physical_offset == end
    assert store.control_state() == tables_before
    log.close()
    store.close()


def test_without_a_marker_nothing_changes(tmp_path: Path) -> None:
    build(tmp_path / "node", term=1, count=5)
    before = sorted(os.listdir(tmp_path / "node" / "commitlog"))
    (tmp_path / "staging").mkdir()
    (tmp_path / "staging" / "00000000000000000000").write_bytes(b"partial")
    assert not resume_interrupted_install(
        OsFileSystem(), str(tmp_path / "node"), str(tmp_path / "staging")
    )
    assert sorted(os.listdir(tmp_path / "node" / "commitlog")) == before
    assert not (tmp_path / "staging").exists()


def test_a_finished_install_stays_finished_after_a_power_loss() -> None:
    """The marker's removal is durable before the staging directory goes: a marker that came
    back after a power loss would make the next start replay this install over newer entries
    (found by the simulation, tests/sim, once it ran the node's own handler)."""
    import random

    from raftlog.node.replication.snapshot_install import (
        MARKER_FILE_NAME,
        discard_staging,
        resume_interrupted_install,
    )
    from tests.support.sim_filesystem import SimFileSystem

    fs = SimFileSystem()
    staging = "/store/commitlog.incoming"
    fs.makedirs(staging)
    marker = fs.open(f"{staging}/{MARKER_FILE_NAME}")
    marker.pwrite(b"{}", 0)
    marker.sync()
    marker.close()
    fs.sync_dir(staging)  # the marker is durable, as install_snapshot makes it
    discard_staging(fs, staging)
    fs.power_loss(random.Random(0))
    assert not fs.exists(f"{staging}/{MARKER_FILE_NAME}")
    assert resume_interrupted_install(fs, "/store", staging) is False
