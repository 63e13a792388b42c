import os
import struct

from raftlog.store.consume_queue import FileHandleCache
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.hashing import key_hash
from raftlog.store.index_file import HEADER_SIZE_BYTES, IndexService


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def make_service(root, slot_count=8, entry_count=6, clock=None):
    fs = OsFileSystem()
    return IndexService(
        fs, FileHandleCache(fs, 4), str(root), slot_count, entry_count, clock or Clock()
    )


def put(service, topic, key, physical_offset, timestamp_ms):
    service.put(key_hash(topic, key), physical_offset, timestamp_ms)


T0 = 1_700_000_000_000


def test_put_query_and_collision_chains(tmp_path) -> None:
    service = make_service(tmp_path, slot_count=1, entry_count=100)  # every key collides
    for i in range(10):
        put(service, "orders", f"k{i % 3}", i * 100, T0 + i * 1000)
    assert service.query("orders", "k0", T0, T0 + 100_000, 10) == [900, 600, 300, 0]
    assert service.query("orders", "k1", T0, T0 + 100_000, 2) == [700, 400]
    assert service.query("other", "k0", T0, T0 + 100_000, 10) == []
    # Window: only entries stored within [T0 + 3000, T0 + 6500].
    assert service.query("orders", "k0", T0 + 3000, T0 + 6500, 10) == [600, 300]


def test_header_layout_and_persistence(tmp_path) -> None:
    service = make_service(tmp_path, slot_count=8, entry_count=50)
    put(service, "t", "a", 4096, T0 + 1500)
    put(service, "t", "b", 5000, T0 + 2500)
    service.flush()
    (name,) = os.listdir(tmp_path / "index")
    raw = (tmp_path / "index" / name).read_bytes()
    assert len(raw) == HEADER_SIZE_BYTES + 8 * 4 + 50 * 20
    assert struct.unpack(">qqqqii", raw[:40]) == (T0 + 1500, T0 + 2500, 4096, 5000, 8, 3)
    entry_1 = raw[40 + 32 + 20 : 40 + 32 + 40]
    assert struct.unpack(">iqii", entry_1) == (key_hash("t", "a"), 4096, 0, 0)
    reopened = make_service(tmp_path, slot_count=8, entry_count=50)
    assert reopened.query("t", "b", T0, T0 + 10_000, 5) == [5000]
    put(reopened, "t", "b", 6000, T0 + 3000)
    assert reopened.query("t", "b", T0, T0 + 10_000, 5) == [6000, 5000]


def test_rolls_to_new_file_when_full_and_queries_across_files(tmp_path) -> None:
    clock = Clock()
    service = make_service(tmp_path, slot_count=4, entry_count=4, clock=clock)  # 3 entries each
    for i in range(8):
        put(service, "t", "same", i, T0 + i * 1000)
    assert service.file_count == 3
    assert service.query("t", "same", T0, T0 + 100_000, 100) == [7, 6, 5, 4, 3, 2, 1, 0]
    assert service.query("t", "same", T0, T0 + 100_000, 4) == [7, 6, 5, 4]
    names = sorted(os.listdir(tmp_path / "index"))
    assert len(set(names)) == 3 and names == sorted(names, key=int)


def test_recover_drops_entries_at_or_past_offset(tmp_path) -> None:
    service = make_service(tmp_path, slot_count=2, entry_count=4)  # 3 entries per file
    for i in range(8):
        put(service, "t", f"k{i % 2}", i * 10, T0 + i)
    service.recover(35)
    assert service.file_count == 2
    assert service.query("t", "k0", T0, T0 + 100, 100) == [20, 0]
    assert service.query("t", "k1", T0, T0 + 100, 100) == [30, 10]
    put(service, "t", "k0", 40, T0 + 9)
    assert service.query("t", "k0", T0, T0 + 100, 100) == [40, 20, 0]
    service.recover(0)
    assert service.file_count == 1
    assert service.query("t", "k0", T0, T0 + 100, 100) == []


def test_recover_rebuilds_stale_slots_after_crash(tmp_path) -> None:
    service = make_service(tmp_path, slot_count=4, entry_count=100)
    for i in range(5):
        put(service, "t", "k", i * 10, T0)
    service.flush()
    for i in range(5, 8):  # never flushed: header counts 5 entries, slots are stale
        put(service, "t", "k", i * 10, T0)
    reopened = make_service(tmp_path, slot_count=4, entry_count=100)
    reopened.recover(30)
    assert reopened.query("t", "k", T0, T0 + 10, 100) == [20, 10, 0]


def test_delete_files_below_keeps_newest(tmp_path) -> None:
    service = make_service(tmp_path, slot_count=2, entry_count=3)  # 2 entries per file
    for i in range(6):
        put(service, "t", "k", i * 10, T0)
    assert service.delete_files_below(10) == 0
    assert service.delete_files_below(11) == 1
    assert service.delete_files_below(10_000) == 1
    assert service.file_count == 1
    assert service.query("t", "k", T0, T0, 10) == [50, 40]


def test_truncate_from_ignores_offsets_past_the_end(tmp_path) -> None:
    service = make_service(tmp_path)
    put(service, "t", "k", 10, T0)
    service.truncate_from(11)
    assert service.query("t", "k", T0, T0, 10) == [10]
    service.truncate_from(10)
    assert service.query("t", "k", T0, T0, 10) == []


def test_file_without_a_written_header_is_dropped_at_open(tmp_path) -> None:
    service = make_service(tmp_path, slot_count=4, entry_count=10)
    put(service, "t", "k", 10, T0)
    service.flush()
    # A crash right after the next file was created, before its header was written.
    (tmp_path / "index" / f"{T0 + 10**9:020d}").write_bytes(b"\0" * 100)
    reopened = make_service(tmp_path, slot_count=4, entry_count=10)
    assert reopened.file_count == 1
    assert reopened.query("t", "k", T0, T0, 10) == [10]
    assert len(os.listdir(tmp_path / "index")) == 1
