"""Pulls read neighbouring records with one pread (CommitLog.read_records): the answers are
the same as one read per record, across segment ends and interleaved queues, and a damaged
byte inside a batch is still refused."""

from pathlib import Path

import pytest

from raftlog.store.errors import CorruptRecordError
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import Message
from raftlog.store.segment import segment_file_name
from tests.unit.store.test_message_store import open_store


def filled(tmp_path: Path):
    store = open_store(tmp_path, OsFileSystem(), segment_size_bytes=4096)
    store.create_topic("t", 3)
    results = store.put_messages(
        [Message("t", i % 3, b"m%03d-" % i + b"y" * (i % 40), tags=f"g{i % 2}") for i in range(300)]
    )
    assert len(store.commit_log.segments()) > 3
    return store, results


def test_batched_pulls_answer_as_single_reads(tmp_path: Path) -> None:
    store, results = filled(tmp_path)
    for queue_id in range(3):
        got = store.get_messages("t", queue_id, 0, max_messages=1000, max_bytes=1 << 30)
        expected = [store.commit_log.read_record(r.physical_offset) for r in results[queue_id::3]]
        assert got.messages == expected
        tagged = store.get_messages("t", queue_id, 0, max_messages=1000, tag="g1")
        assert [m.body for m in tagged] == [m.body for m in expected if m.tags == "g1"]
    # Paging with small limits walks the same messages.
    paged, offset = [], 0
    for _ in range(1000):
        page = store.get_messages("t", 1, offset, max_messages=7, max_bytes=300)
        if not page.messages:
            break
        paged += page.messages
        offset = page.next_queue_offset
    assert [m.queue_offset for m in paged] == list(range(100))
    store.close()


def test_a_damaged_byte_inside_a_batch_is_refused(tmp_path: Path) -> None:
    store, results = filled(tmp_path)
    victim = results[30]  # queue 0, in the middle of a run
    segment_start = victim.physical_offset - victim.physical_offset % 4096
    path = tmp_path / "commitlog" / segment_file_name(segment_start)
    data = bytearray(path.read_bytes())
    data[victim.physical_offset - segment_start + 100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError):
        store.get_messages("t", 0, 0, max_messages=1000, max_bytes=1 << 30)
    store.close()
