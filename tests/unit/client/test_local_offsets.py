"""Broadcast consumption's local offsets (client/local_offsets.py) and the Consumer in
broadcast mode against a scripted server: offsets go to the member's own file, never to the
cluster; a restarted member resumes; one member per (client id, group, topic) at a time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftlog.client import Consumer
from raftlog.client.local_offsets import LocalOffsetStore, OffsetsInUseError, offsets_root
from raftlog.proto import client_pb2
from tests.unit.client.fake_server import FakeServer

BODIES = [b"m0", b"m1", b"m2"]


def test_offsets_round_trip_and_merge(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path, "host-1", "%RETRY%g|x", "t")
    try:
        assert store.load() == {}
        store.save({0: 3, 1: 7})
        store.save({1: 9})
        assert store.load() == {0: 3, 1: 9}
        assert store.path == tmp_path / "host-1" / "%RETRY%g|x" / "t.json"
        assert json.loads(store.path.read_text())["offsets"] == {"0": 3, "1": 9}
        assert not list(store.path.parent.glob("*.tmp"))
    finally:
        store.close()


def test_one_member_at_a_time(tmp_path: Path) -> None:
    first = LocalOffsetStore(tmp_path, "host-1", "g", "t")
    with pytest.raises(OffsetsInUseError, match="its own client_id"):
        LocalOffsetStore(tmp_path, "host-1", "g", "t")
    LocalOffsetStore(tmp_path, "host-2", "g", "t").close()  # another member: fine
    first.close()
    LocalOffsetStore(tmp_path, "host-1", "g", "t").close()  # released by close


@pytest.mark.parametrize("client_id", ["", "..", "a/b", "a b", "x" * 129])
def test_a_client_id_that_cannot_name_a_file_is_refused(tmp_path: Path, client_id: str) -> None:
    with pytest.raises(ValueError, match="cannot name an offsets file"):
        LocalOffsetStore(tmp_path, client_id, "g", "t")


def test_a_damaged_file_is_reported_not_ignored(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path, "h", "g", "t")
    try:
        store.path.write_text("{not json")
        with pytest.raises(ValueError, match="move it away"):
            store.load()
    finally:
        store.close()


def test_the_directory_comes_from_the_argument_the_environment_or_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_OFFSETS_DIR", str(tmp_path / "env"))
    assert offsets_root(tmp_path / "arg") == tmp_path / "arg"
    assert offsets_root(None) == tmp_path / "env"
    monkeypatch.delenv("RAFTLOG_OFFSETS_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert offsets_root(None) == tmp_path / "home" / ".raftlog_offsets"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer().start()
    refused: list[str] = []
    fake.refused = refused  # type: ignore[attr-defined]

    def describe(request: Any, context: Any) -> Any:
        return client_pb2.DescribeTopicResponse(
            topic=client_pb2.TopicInfo(name=request.topic, queue_count=1),
            queues=[client_pb2.QueueInfo(queue_id=0, max_queue_offset=len(BODIES))],
        )

    def pull(request: Any, context: Any) -> Any:
        chosen = BODIES[request.queue_offset :][:1]
        found = client_pb2.PULL_STATUS_FOUND
        return client_pb2.PullResponse(
            status=found if chosen else client_pb2.PULL_STATUS_NO_NEW_MESSAGES,
            messages=[
                client_pb2.StoredMessage(queue_offset=request.queue_offset, body=b) for b in chosen
            ],
            next_queue_offset=request.queue_offset + len(chosen),
            max_queue_offset=len(BODIES),
        )

    def refuse(name: str) -> Any:
        def hook(request: Any, context: Any) -> Any:
            refused.append(name)
            raise AssertionError(f"a broadcast consumer called {name}")

        return hook

    fake.hooks.update(
        DescribeTopic=describe,
        Pull=pull,
        FetchOffsets=refuse("FetchOffsets"),
        CommitOffsets=refuse("CommitOffsets"),
    )
    yield fake
    fake.stop()


def test_a_broadcast_member_resumes_from_its_own_file(server: FakeServer, tmp_path: Path) -> None:
    def member(client_id: str) -> Consumer:
        return Consumer(
            [server.address], "g", "t", broadcast=True, client_id=client_id, offsets_dir=tmp_path
        )

    with member("a") as first:
        assert [m.body for m in first.poll(0.05)] == [b"m0"]
        assert first.commit() is None
        with pytest.raises(OffsetsInUseError):
            member("a")
    with member("a") as again, member("b") as other:
        assert [m.body for m in again.poll(0.05)] == [b"m1"]  # resumed
        assert [m.body for m in other.poll(0.05)] == [b"m0"]  # its own progress
        again.commit({0: 3})
        with pytest.raises(ValueError, match="not read"):
            again.commit({5: 1})
    stored = LocalOffsetStore(tmp_path, "a", "g", "t")
    assert stored.load() == {0: 3}
    stored.close()
    assert server.refused == []  # type: ignore[attr-defined]


def test_a_paused_queue_is_not_pulled(server: FakeServer, tmp_path: Path) -> None:
    with Consumer(
        [server.address], "g", "t", broadcast=True, client_id="p", offsets_dir=tmp_path
    ) as consumer:
        consumer.pause([0])
        assert consumer.poll(0.05) == []
        assert consumer.positions == {0: 0}
        consumer.resume([0])
        assert [m.body for m in consumer.poll(0.05)] == [b"m0"]
