import pytest

from raftlog.store.consumer_offsets import ConsumerOffsets
from raftlog.store.errors import InvalidOffsetError
from raftlog.store.filesystem import OsFileSystem


def test_commit_fetch_and_reload(tmp_path) -> None:
    fs = OsFileSystem()
    offsets = ConsumerOffsets(fs, str(tmp_path))
    assert offsets.fetch("g", "orders", 0) is None
    offsets.commit("g", "orders", 0, 5)
    offsets.commit("g", "orders", 1, 7)
    offsets.commit("h", "orders", 0, 1)
    offsets.commit("g", "orders", 0, 3)  # rewinding is allowed
    offsets.persist()
    reloaded = ConsumerOffsets(fs, str(tmp_path))
    assert reloaded.fetch("g", "orders", 0) == 3
    assert reloaded.fetch("g", "orders", 1) == 7
    assert reloaded.groups() == ["g", "h"]
    assert reloaded.offsets_of_group("g") == {("orders", 0): 3, ("orders", 1): 7}


def test_unpersisted_commit_is_not_on_disk(tmp_path) -> None:
    fs = OsFileSystem()
    offsets = ConsumerOffsets(fs, str(tmp_path))
    offsets.commit("g", "t", 0, 1)
    assert ConsumerOffsets(fs, str(tmp_path)).fetch("g", "t", 0) is None


def test_negative_offset_refused(tmp_path) -> None:
    offsets = ConsumerOffsets(OsFileSystem(), str(tmp_path))
    with pytest.raises(InvalidOffsetError):
        offsets.commit("g", "t", 0, -1)
