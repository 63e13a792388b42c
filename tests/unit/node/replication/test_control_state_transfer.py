"""The control state a snapshot carries (node/replication/snapshot_install.py):

- sound to install under the log: for any log of topic, offset and access commands, the
  leader's tables at an applied index A, installed at a snapshot index S <= A and followed by
  the commands after S (S+1..A a second time), end exactly as the leader's;
- transferred whole: the leader's SegmentSource sends it in CRC-checked pieces before the
  segments when asked, the follower's fetch_segments stages it only whole and decodable, and
  a leader that sends none leaves nothing staged; a leader that has not applied the snapshot
  index answers UNAVAILABLE.
"""

from __future__ import annotations

import contextlib
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.node.control import ChangeAccess, CommitOffsets, CreateTopic, StoreCommand
from raftlog.node.control import apply_to_store as apply_command
from raftlog.node.peer.codec import encode_snapshot_meta
from raftlog.node.peer.segment_source import SegmentSource
from raftlog.node.replication import segment_installer
from raftlog.node.replication.segment_installer import SegmentTransferError, fetch_segments
from raftlog.node.replication.snapshot_install import read_staged_control_state
from raftlog.proto import peer_pb2
from raftlog.raft.types import ConfState, SnapshotMeta
from raftlog.store.control_state import ControlState
from raftlog.store.errors import StoreError
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import Message, MessageStore
from tests.unit.store.test_message_store import open_store

# Few names, so commands often meet on the same key (an invalid one is refused everywhere).
TOPICS = ("orders", "audit", "bad name")
GROUPS = ("billing", "ops")
SUBJECTS = ("alice", "*")
PATTERNS = ("orders", "orders-*")
PERMISSIONS = ("produce", "consume", "admin")

commands = st.one_of(
    st.builds(CreateTopic, st.sampled_from(TOPICS), st.integers(1, 3)),
    st.builds(
        lambda group, topic, queue_id, offset: CommitOffsets(group, ((topic, queue_id, offset),)),
        st.sampled_from(GROUPS),
        st.sampled_from(TOPICS),
        st.integers(0, 2),
        st.integers(0, 9),
    ),
    st.builds(
        ChangeAccess,
        st.sampled_from(SUBJECTS),
        st.sampled_from(PATTERNS),
        st.lists(st.sampled_from(PERMISSIONS), max_size=3).map(tuple),
        st.booleans(),
    ),
)


def apply(store: MessageStore, command: StoreCommand) -> None:
    """What every replica does with a committed control record (ready.py ``_apply_control``):
    a refused one is logged and skipped, the same everywhere."""
    with contextlib.suppress(StoreError):
        apply_command(store, command)


def committed_log(store: MessageStore, proposed: list[StoreCommand]) -> list[ControlState]:
    """Apply ``proposed`` on the leader's ``store`` as the leader would let them into the log:
    an offset commit for a queue its applied tables lack is refused before it is proposed
    (raft_write_path.commit_offsets), so it never reaches the log and is dropped from
    ``proposed``; the rest are applied. Returns the tables after each prefix (index 0: none)."""
    states = [store.control_state()]
    for command in list(proposed):
        if isinstance(command, CommitOffsets):
            topic, queue_id, _ = command.offsets[0]
            config = store.list_topics()
            if not any(c.name == topic and queue_id < c.queue_count for c in config):
                proposed.remove(command)
                continue
        apply(store, command)
        states.append(store.control_state())
    return states


@settings(max_examples=150, deadline=None)
@given(st.lists(commands, max_size=30), st.data())
def test_the_leaders_tables_installed_under_the_log_end_as_the_leaders(
    proposed: list[StoreCommand], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as root:
        leader = open_store(Path(root) / "leader")
        log = list(proposed)
        states = committed_log(leader, log)
        leader.close()
        applied_index = data.draw(st.integers(0, len(log)), label="A")
        snapshot_index = data.draw(st.integers(0, applied_index), label="S")
        follower = open_store(Path(root) / "follower")
        follower.replace_control_state(states[applied_index])
        for command in log[snapshot_index:]:
            apply(follower, command)
        assert follower.control_state() == states[-1]
        follower.close()


# -- the transfer -------------------------------------------------------------------------

STATE = ControlState(
    topics={"orders": 4, "audit": 1},
    consumer_offsets={("billing", "orders", 2): 40},
    access_rules={("alice", "orders-*"): frozenset({"produce"})},
)
SNAPSHOT_INDEX = 7
APPLIED_INDEX = 9


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code = code


class Context:
    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class Stub:
    """RaftPeerStub in process: FetchSegments is the leader's SegmentSource (or ``chunks``)."""

    def __init__(self, answer: Any) -> None:
        self._answer = answer

    def FetchSegments(self, request: Any, timeout: float) -> Iterator[Any]:
        return iter(self._answer(request))


class Dialer:
    def address_of(self, node_id: str, client_address: str) -> str:
        return client_address

    def channel(self, node_id: str, peer_address: str) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


@pytest.fixture
def leader_store(tmp_path: Path) -> Iterator[MessageStore]:
    store = open_store(tmp_path / "leader")
    store.create_topic("orders", 1)
    for i in range(20):
        store.put_messages([Message("orders", 0, b"m%d-" % i + b"x" * 300)])
    yield store
    store.close()


def request(with_control_state: bool, chunk_bytes: int = 0) -> peer_pb2.FetchSegmentsRequest:
    return peer_pb2.FetchSegmentsRequest(
        cluster_id="c",
        node_id="b",
        snapshot=encode_snapshot_meta(SnapshotMeta(SNAPSHOT_INDEX, 1, ConfState(("a", "b")))),
        with_control_state=with_control_state,
        max_chunk_bytes=chunk_bytes,
    )


def source(store: MessageStore, applied_index: int = APPLIED_INDEX) -> SegmentSource:
    def capture(log_index: int) -> tuple[int, ControlState] | None:
        return (applied_index, STATE) if applied_index >= log_index else None

    return SegmentSource(store.commit_log, lambda index, term: store.commit_log.max_offset, capture)


def fetch(
    monkeypatch: pytest.MonkeyPatch, staging: Path, answer: Any, ask: peer_pb2.FetchSegmentsRequest
) -> segment_installer.FetchedSnapshot:
    monkeypatch.setattr(segment_installer.peer_pb2_grpc, "RaftPeerStub", lambda _: Stub(answer))
    return fetch_segments(Dialer(), "a", "leader:1", ask, str(staging), 4096, 5.0)  # type: ignore[arg-type]


def test_the_control_state_is_sent_in_pieces_and_staged_whole(
    leader_store: MessageStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask = request(with_control_state=True, chunk_bytes=16)
    chunks = list(source(leader_store).fetch(ask, Context()))  # type: ignore[arg-type]
    kinds = [chunk.WhichOneof("chunk") for chunk in chunks]
    pieces = kinds.count("control_state")
    assert pieces > 3 and kinds[:pieces] == ["control_state"] * pieces
    assert kinds[-1] == "done" and "control_state" not in kinds[pieces:]

    staging = tmp_path / "staging"
    fetched = fetch(monkeypatch, staging, lambda _: chunks, ask)
    assert fetched.control_state_index == APPLIED_INDEX
    assert fetched.end_physical_offset == leader_store.commit_log.max_offset
    assert read_staged_control_state(OsFileSystem(), str(staging)) == STATE


def test_a_leader_that_sends_no_control_state_stages_none(
    leader_store: MessageStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A leader that predates the field sends what it sends when not asked.
    chunks = list(source(leader_store).fetch(request(False), Context()))  # type: ignore[arg-type]
    assert "control_state" not in [chunk.WhichOneof("chunk") for chunk in chunks]
    staging = tmp_path / "staging"
    fetched = fetch(monkeypatch, staging, lambda _: chunks, request(True))
    assert fetched.control_state_index is None
    assert read_staged_control_state(OsFileSystem(), str(staging)) is None


def tampered(chunks: list[Any], how: str) -> list[Any]:
    pieces = [c for c in chunks if c.WhichOneof("chunk") == "control_state"]
    rest = [c for c in chunks if c.WhichOneof("chunk") != "control_state"]
    if how == "crc":
        pieces[1].control_state.data_crc32 ^= 1
    elif how == "order":
        pieces[1], pieces[2] = pieces[2], pieces[1]
    elif how == "short":
        pieces = pieces[:-1]
    elif how == "garbled":
        for piece in pieces:
            piece.control_state.data = b"x" * len(piece.control_state.data)
            piece.control_state.data_crc32 = zlib.crc32(piece.control_state.data)
    return [*pieces, *rest]


@pytest.mark.parametrize("how", ["crc", "order", "short", "garbled"])
def test_a_damaged_control_state_fails_the_transfer(
    leader_store: MessageStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    ask = request(with_control_state=True, chunk_bytes=16)
    chunks = tampered(list(source(leader_store).fetch(ask, Context())), how)  # type: ignore[arg-type]
    with pytest.raises(SegmentTransferError):
        fetch(monkeypatch, tmp_path / "staging", lambda _: chunks, ask)


def test_a_leader_that_has_not_applied_the_snapshot_index_answers_unavailable(
    leader_store: MessageStore,
) -> None:
    behind = source(leader_store, applied_index=SNAPSHOT_INDEX - 1)
    with pytest.raises(Aborted) as aborted:
        list(behind.fetch(request(with_control_state=True), Context()))  # type: ignore[arg-type]
    assert aborted.value.code is grpc.StatusCode.UNAVAILABLE
    # Not asked for the control state, it serves the segments as before.
    assert list(behind.fetch(request(False), Context()))[-1].HasField("done")  # type: ignore[arg-type]
