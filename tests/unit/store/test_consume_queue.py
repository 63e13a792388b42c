import os

from raftlog.store.consume_queue import (
    ConsumeQueue,
    ConsumeQueueUnit,
    FileHandleCache,
    WriteBehind,
    decode_unit,
    encode_unit,
    list_queues,
)
from raftlog.store.filesystem import OsFileSystem
from tests.support import load_vectors

VECTOR = load_vectors()["consume_queue_unit"]


def make_queue(root, handles=None, file_units=4, topic="orders", queue_id=1):
    fs = OsFileSystem()
    handles = handles or FileHandleCache(fs, 8)
    return ConsumeQueue(fs, handles, str(root), topic, queue_id, file_units)


def units_for(physical_offsets, size=100, tag_hash=7):
    return b"".join(encode_unit(p, size, tag_hash) for p in physical_offsets)


def test_unit_codec_matches_vector() -> None:
    raw = bytes.fromhex(VECTOR["hex"])
    assert encode_unit(VECTOR["commitlog_offset"], VECTOR["size"], VECTOR["tag_hash"]) == raw
    assert decode_unit(raw) == ConsumeQueueUnit(
        VECTOR["commitlog_offset"], VECTOR["size"], VECTOR["tag_hash"]
    )


def test_append_spans_files_and_reads_back(tmp_path) -> None:
    queue = make_queue(tmp_path)
    queue.append_units(0, units_for([0, 100, 200]))
    queue.append_units(3, units_for([300, 400, 500, 600, 700, 800]))
    assert queue.max_queue_offset == 9
    names = os.listdir(tmp_path / "consumequeue" / "orders" / "1")
    assert sorted(names) == [f"{0:020d}", f"{80:020d}", f"{160:020d}"]
    assert [u.physical_offset for u in queue.read(2, 5)] == [200, 300, 400, 500, 600]
    assert [u.physical_offset for u in queue.read(7, 100)] == [700, 800]
    assert queue.read(9, 10) == []
    assert list_queues(OsFileSystem(), str(tmp_path)) == [("orders", 1)]


def test_reload_finds_end_and_drops_torn_zero_units(tmp_path) -> None:
    queue = make_queue(tmp_path)
    queue.append_units(0, units_for([0, 100, 200, 300, 400, 500]))
    last = tmp_path / "consumequeue" / "orders" / "1" / f"{80:020d}"
    with open(last, "ab") as f:
        f.write(b"\0" * 20 + b"\1\2\3")  # a zero unit and a torn partial one
    reloaded = make_queue(tmp_path)
    assert reloaded.max_queue_offset == 6
    assert os.path.getsize(last) == 40
    reloaded.append_units(6, units_for([600]))
    assert [u.physical_offset for u in reloaded.read(4, 10)] == [400, 500, 600]


def test_queue_offset_lookups(tmp_path) -> None:
    queue = make_queue(tmp_path)
    queue.append_units(0, units_for(range(0, 1000, 100)))
    assert queue.queue_offset_for_physical_offset(0) == 0
    assert queue.queue_offset_for_physical_offset(450) == 5
    assert queue.queue_offset_for_physical_offset(500) == 5
    assert queue.queue_offset_for_physical_offset(10_000) == 10

    def timestamp_of(unit):
        return 1000 + unit.physical_offset

    assert queue.queue_offset_for_time(1350, 0, timestamp_of) == 4
    assert queue.queue_offset_for_time(0, 0, timestamp_of) == 0
    assert queue.queue_offset_for_time(99_999, 0, timestamp_of) == 10
    assert queue.queue_offset_for_time(0, 3, timestamp_of) == 3


def test_truncate_from_physical_offset(tmp_path) -> None:
    queue = make_queue(tmp_path)
    queue.append_units(0, units_for(range(0, 1000, 100)))
    queue.truncate_from_physical_offset(450)
    assert queue.max_queue_offset == 5
    assert sorted(os.listdir(tmp_path / "consumequeue" / "orders" / "1")) == [
        f"{0:020d}",
        f"{80:020d}",
    ]
    queue.append_units(5, units_for([460]))
    reloaded = make_queue(tmp_path)
    assert [u.physical_offset for u in reloaded.read(0, 100)] == [0, 100, 200, 300, 400, 460]
    reloaded.truncate_from_physical_offset(0)
    assert reloaded.max_queue_offset == 0
    reloaded.append_units(0, units_for([5]))
    assert reloaded.read(0, 10)[0].physical_offset == 5


def test_delete_files_below_keeps_last_file(tmp_path) -> None:
    queue = make_queue(tmp_path)
    queue.append_units(0, units_for(range(0, 1000, 100)))  # files at 0, 4, 8
    assert queue.delete_files_below(300) == 0  # file 0's last unit points at 300
    assert queue.delete_files_below(301) == 1
    assert queue.min_queue_offset == 4
    assert [u.physical_offset for u in queue.read(0, 2)] == [400, 500]
    assert queue.delete_files_below(10_000) == 1
    assert queue.min_queue_offset == 8
    assert make_queue(tmp_path).min_queue_offset == 8


def test_handle_cache_bounds_open_files_across_queues(tmp_path) -> None:
    fs = OsFileSystem()
    handles = FileHandleCache(fs, 3)
    queues = [make_queue(tmp_path, handles, topic=f"t{i}", queue_id=0) for i in range(20)]
    for i, queue in enumerate(queues):
        queue.append_units(0, units_for([i * 10]))
        assert handles.open_handle_count <= 3
    for i, queue in enumerate(queues):
        assert queue.read(0, 1)[0].physical_offset == i * 10
        assert handles.open_handle_count <= 3
    handles.sync_dirty()
    handles.close_all()
    assert handles.open_handle_count == 0


def test_read_of_deleted_file_returns_nothing(tmp_path) -> None:
    fs = OsFileSystem()
    handles = FileHandleCache(fs, 3)
    path = str(tmp_path / "gone")
    assert handles.pread(path, 20, 0) == b""
    assert not fs.exists(path)


def test_truncate_finds_intact_prefix_after_torn_and_missing_files(tmp_path) -> None:
    queue = make_queue(tmp_path)  # 4 units per file
    queue.append_units(0, units_for(range(0, 1200, 100)))  # files at units 0, 4, 8
    directory = tmp_path / "consumequeue" / "orders" / "1"
    # A crash kept file 4 only partly: unit 5 and later read as zeros; file 8 survived whole.
    with open(directory / f"{80:020d}", "r+b") as f:
        f.seek(20)
        f.write(b"\0" * 60)
    reloaded = make_queue(tmp_path)
    reloaded.truncate_from_physical_offset(1000)  # the checkpoint's dispatched offset
    assert reloaded.max_queue_offset == 5
    assert [u.physical_offset for u in reloaded.read(0, 100)] == [0, 100, 200, 300, 400]
    assert sorted(os.listdir(directory)) == [f"{0:020d}", f"{80:020d}"]


def test_dirty_files_survive_power_loss_only_after_sync(tmp_path) -> None:
    import random

    from tests.support.sim_filesystem import SimFileSystem

    fs = SimFileSystem()
    handles = FileHandleCache(fs, 1)  # every queue evicts the other's handle
    root = "/store"
    first = ConsumeQueue(fs, handles, root, "a", 0, 4)
    second = ConsumeQueue(fs, handles, root, "b", 0, 4)
    first.append_units(0, units_for([0, 100]))
    second.append_units(0, units_for([50]))
    dirty = handles.take_dirty()
    first.append_units(2, units_for([200]))  # after the take: not covered by this sync
    handles.sync_files(dirty)
    fs.power_loss(random.Random(1))
    handles = FileHandleCache(fs, 1)
    assert [u.physical_offset for u in ConsumeQueue(fs, handles, root, "a", 0, 4).read(0, 2)] == [
        0,
        100,
    ]
    assert ConsumeQueue(fs, handles, root, "b", 0, 4).read(0, 1)[0].physical_offset == 50


def test_write_behind_buffers_until_write_all_and_reads_see_buffered_units(tmp_path) -> None:
    fs = OsFileSystem()
    write_behind = WriteBehind(max_buffered_units=100)
    queue = ConsumeQueue(fs, FileHandleCache(fs, 8), str(tmp_path), "orders", 1, 4, write_behind)
    queue.append_units(0, units_for([0, 100, 200]))
    assert not os.path.exists(tmp_path / "consumequeue")  # nothing written yet
    write_behind.write_all()
    queue.append_units(3, units_for([300, 400, 500]))  # straddles written and buffered
    assert write_behind.buffered_units == 3
    assert [u.physical_offset for u in queue.read(1, 10)] == [100, 200, 300, 400, 500]
    assert (queue.min_queue_offset, queue.max_queue_offset) == (0, 6)
    assert queue.queue_offset_for_physical_offset(350) == 4
    queue.truncate_from_physical_offset(500)  # cuts only the buffer
    queue.truncate_from_physical_offset(200)  # cuts the buffer and a written unit
    queue.append_units(2, units_for([250]))
    write_behind.write_all()
    reopened = make_queue(tmp_path, topic="orders", queue_id=1)
    assert [u.physical_offset for u in reopened.read(0, 10)] == [0, 100, 250]


def test_write_behind_writes_everything_at_its_bound(tmp_path) -> None:
    fs = OsFileSystem()
    handles = FileHandleCache(fs, 8)
    write_behind = WriteBehind(max_buffered_units=4)
    first = ConsumeQueue(fs, handles, str(tmp_path), "a", 0, 4, write_behind)
    second = ConsumeQueue(fs, handles, str(tmp_path), "b", 0, 4, write_behind)
    first.append_units(0, units_for([0, 100]))
    second.append_units(0, units_for([50]))
    assert write_behind.buffered_units == 3 and not list_queues(fs, str(tmp_path))
    second.append_units(1, units_for([150]))  # the fourth unit reaches the bound
    assert write_behind.buffered_units == 0
    assert list_queues(fs, str(tmp_path)) == [("a", 0), ("b", 0)]
    assert [u.physical_offset for u in make_queue(tmp_path, topic="b", queue_id=0).read(0, 9)] == [
        50,
        150,
    ]


def test_many_dirty_files_take_one_filesystem_sync_on_the_real_disk(tmp_path, monkeypatch) -> None:
    fs = OsFileSystem()
    handles = FileHandleCache(fs, 8)
    calls: list[int] = []
    plain = OsFileSystem.sync_filesystems_of

    def counting(self, paths) -> bool:
        paths = list(paths)
        calls.append(len(paths))
        return plain(self, paths)

    monkeypatch.setattr(OsFileSystem, "sync_filesystems_of", counting)
    for name in range(100):
        handles.pwrite(str(tmp_path / f"{name}"), b"unit", 0)
    handles.sync_dirty()  # one call for all 100 (it may decline and fsync each instead)
    handles.pwrite(str(tmp_path / "0"), b"unit", 4)
    handles.sync_dirty()  # one dirty file: fsynced on its own
    assert calls == [100]
    assert handles.take_dirty().paths == set()
