"""What a Raft follower needs from the store to install the leader's segments: retention that
stops at a bound (the compacted log's end), ``replace_segments`` / ``install_commit_log``, and
queues rebuilt from a log whose oldest messages are not queue offset 0."""

from pathlib import Path

import pytest

from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import Message
from raftlog.store.segment import segment_file_name
from tests.unit.store.test_message_store import Clock, open_store
from tests.unit.store.test_retention import HOUR_MS, T0

SEGMENT_SIZE_BYTES = 1024


def make(root: Path, clock: Clock):
    store = open_store(
        root,
        OsFileSystem(),
        clock,
        segment_size_bytes=SEGMENT_SIZE_BYTES,
        consume_queue_file_units=4,
        index_entry_count=8,
        retention_hours=1,
        disk_clean_watermark_ratio=0.000001,
    )
    store.create_topic("t", 2)
    return store


def fill(store, count: int, tag: str) -> None:
    for i in range(count):
        store.put_messages([Message("t", i % 2, b"%s-%d-" % (tag.encode(), i) + b"x" * 150)])


def copy_segments(store, source: Path, staging: Path) -> None:
    staging.mkdir()
    for info in store.commit_log.segments():
        name = segment_file_name(info.start_offset)
        (staging / name).write_bytes((source / "commitlog" / name).read_bytes())


def bodies(store, queue_id: int) -> list[tuple[int, bytes]]:
    return [(m.queue_offset, m.body) for m in store.get_messages("t", queue_id, 0, 1000)]


def test_retention_deletes_nothing_ending_past_the_bound(tmp_path: Path) -> None:
    clock = Clock(T0)
    store = make(tmp_path / "a", clock)
    fill(store, 24, "a")
    segments = store.commit_log.segments()
    assert len(segments) >= 4
    clock.now_ms = T0 + 2 * HOUR_MS
    second_end = segments[1].start_offset + SEGMENT_SIZE_BYTES
    # The policy would delete every sealed segment...
    assert store.retention_deletable_end_offset() == segments[-1].start_offset
    # ... the bound lets two go.
    report = store.run_retention(max_deleted_end_offset=second_end + SEGMENT_SIZE_BYTES - 1)
    assert report.deleted_segments == 2
    assert store.commit_log.min_offset == second_end
    store.close()


def test_an_installed_log_serves_what_the_source_retained_at_the_same_offsets(
    tmp_path: Path,
) -> None:
    clock = Clock(T0)
    leader = make(tmp_path / "leader", clock)
    fill(leader, 30, "l")
    clock.now_ms = T0 + 2 * HOUR_MS
    leader.run_retention(max_deleted_end_offset=leader.commit_log.segments()[3].start_offset)
    assert leader.commit_log.min_offset > 0
    follower = make(tmp_path / "follower", Clock(T0))
    fill(follower, 5, "stale")  # its own, older log is replaced entirely
    copy_segments(leader, tmp_path / "leader", tmp_path / "staging")
    follower.install_commit_log(str(tmp_path / "staging"), leader.commit_log.max_offset)
    follower.dispatch()
    assert follower.commit_log.min_offset == leader.commit_log.min_offset
    for queue_id in (0, 1):
        assert bodies(follower, queue_id) == bodies(leader, queue_id)
        assert bodies(leader, queue_id)[0][0] > 0
        # Below the first retained message both answer alike (the tombstones of the rebuilt
        # queue behave as the leader's units of deleted records).
        from_follower = follower.get_messages("t", queue_id, 0, 10)
        from_leader = leader.get_messages("t", queue_id, 0, 10)
        assert [m.queue_offset for m in from_follower] == [m.queue_offset for m in from_leader]
        assert from_follower.min_queue_offset == from_leader.min_queue_offset
    leader.close()
    follower.close()


def test_an_installed_empty_log_starts_where_its_one_file_says(tmp_path: Path) -> None:
    store = make(tmp_path / "s", Clock(T0))
    fill(store, 5, "old")
    staging = tmp_path / "staging"
    staging.mkdir()
    start = 4 * SEGMENT_SIZE_BYTES
    (staging / segment_file_name(start)).write_bytes(b"")
    store.install_commit_log(str(staging), start - 100)
    assert (store.commit_log.min_offset, store.commit_log.max_offset) == (start, start)
    fill(store, 3, "new")
    assert bodies(store, 0)[0][1].startswith(b"new-0")
    store.close()


def test_replace_segments_refuses_a_gap(tmp_path: Path) -> None:
    store = make(tmp_path / "s", Clock(T0))
    staging = tmp_path / "staging"
    staging.mkdir()
    for start in (0, 2 * SEGMENT_SIZE_BYTES):
        (staging / segment_file_name(start)).write_bytes(b"\0" * 8)
    with pytest.raises(ValueError, match="contiguous"):
        store.install_commit_log(str(staging), 8)
    store.close()
