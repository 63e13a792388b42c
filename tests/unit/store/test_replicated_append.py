"""A master-slave copy: CommitLog.read_items on the master, MessageStore.append_replicated on
the slave. The slave's CommitLog comes out byte-identical across segment rolls (blanks
included), its ConsumeQueues serve the same messages, and a block that is misplaced or not
made of whole records changes nothing (a flipped byte inside a record is the stream's chunk
CRC's to catch: tests/integration/test_master_slave.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raftlog.store.errors import CorruptRecordError, InvalidOffsetError
from raftlog.store.message import Message
from raftlog.store.message_store import MessageStore

from .test_message_store import open_store


def copy_all(master: MessageStore, slave: MessageStore, max_bytes: int) -> int:
    """Stream the master's log to the slave the way a slave's HA loop does; returns chunks."""
    for chunks in range(10_000):
        start, data = master.commit_log.read_items(slave.commit_log.max_offset, max_bytes)
        if not data:
            return chunks
        slave.append_replicated(start, data)
        slave.dispatch()
    raise AssertionError("the copy did not finish")


def commit_log_bytes(root: Path) -> dict[str, bytes]:
    directory = root / "commitlog"
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


@pytest.fixture
def pair(tmp_path: Path):  # type: ignore[no-untyped-def]
    from raftlog.store.filesystem import OsFileSystem

    master = open_store(tmp_path / "master", fs=OsFileSystem())
    slave = open_store(tmp_path / "slave", fs=OsFileSystem())
    for store in (master, slave):
        store.create_topic("orders", 2)
    yield master, slave
    master.close()
    slave.close()


def test_the_copy_is_byte_identical_across_segment_rolls(tmp_path: Path, pair) -> None:  # type: ignore[no-untyped-def]
    master, slave = pair
    for batch in range(30):  # ~3 segments of 4 KiB: several rolls with blanks
        bodies = [f"m{batch}-{i}-".encode() * (1 + (batch + i) % 7) for i in range(3)]
        master.put_messages(
            [Message("orders", (batch + i) % 2, body) for i, body in enumerate(bodies)]
        )
    assert len(master.commit_log.segments()) >= 3
    chunks = copy_all(master, slave, max_bytes=700)
    assert chunks > len(master.commit_log.segments())
    assert slave.commit_log.max_offset == master.commit_log.max_offset
    assert commit_log_bytes(tmp_path / "slave") == commit_log_bytes(tmp_path / "master")
    for queue_id in (0, 1):
        got = slave.get_messages("orders", queue_id, 0, max_messages=1000)
        want = master.get_messages("orders", queue_id, 0, max_messages=1000)
        assert [m.body for m in got] == [m.body for m in want]
        assert [m.queue_offset for m in got] == list(range(len(want.messages)))


def test_a_chunk_for_the_wrong_place_or_with_bad_bytes_changes_nothing(pair) -> None:  # type: ignore[no-untyped-def]
    master, slave = pair
    master.put_messages([Message("orders", 0, b"one"), Message("orders", 0, b"two")])
    start, data = master.commit_log.read_items(0, 1 << 20)
    with pytest.raises(InvalidOffsetError, match="the logs diverged"):
        slave.append_replicated(start + 1, data)
    flipped = bytearray(data)
    flipped[5] ^= 0xFF  # the first record's magic
    with pytest.raises(CorruptRecordError):
        slave.append_replicated(start, bytes(flipped))
    with pytest.raises(CorruptRecordError):
        slave.append_replicated(start, data[:-3])
    assert slave.commit_log.max_offset == 0
    assert len(slave.append_replicated(start, data)) == 2
    assert slave.commit_log.max_offset == len(data)


def test_read_items_returns_at_least_one_whole_item_and_nothing_at_the_end(pair) -> None:  # type: ignore[no-untyped-def]
    master, _ = pair
    assert master.commit_log.read_items(0, 100) == (0, b"")
    master.put_messages([Message("orders", 0, b"x" * 300)])
    start, data = master.commit_log.read_items(0, 1)  # the first item even when over the cap
    assert (start, len(data)) == (0, master.commit_log.max_offset)
    assert master.commit_log.read_items(master.commit_log.max_offset, 100)[1] == b""
