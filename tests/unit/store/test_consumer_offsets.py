import pytest

from raftlog.store.consumer_offsets import ConsumerOffsets
from raftlog.store.errors import InvalidArgumentError, InvalidOffsetError
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


def test_bad_offsets_and_groups_are_refused_and_change_nothing(tmp_path) -> None:
    offsets = ConsumerOffsets(OsFileSystem(), str(tmp_path))
    for bad_offset in (-1, 2**63, 1.5, "3", None):
        with pytest.raises(InvalidOffsetError):
            offsets.commit("g", "t", 0, bad_offset)
    for bad_group in ("", None, 5):
        with pytest.raises(InvalidArgumentError):
            offsets.commit(bad_group, "t", 0, 1)
    assert offsets.groups() == []


@pytest.mark.parametrize(
    "content",
    [
        "[]",
        '{"version": 1}',
        '{"version": 1, "offsets": {"g": {"t": {"0": "abc"}}}}',
        '{"version": 1, "offsets": {"g": {"t": {"zero": 1}}}}',
        '{"version": 1, "offsets": {"g": {"t": [1]}}}',
    ],
)
def test_a_damaged_offsets_file_fails_the_load_naming_the_file(tmp_path, content) -> None:
    fs = OsFileSystem()
    offsets = ConsumerOffsets(fs, str(tmp_path))
    offsets.commit("g", "t", 0, 1)
    offsets.persist()
    (tmp_path / "config" / "consumer_offsets.json").write_text(content)
    with pytest.raises(ValueError, match=r"consumer_offsets\.json"):
        ConsumerOffsets(fs, str(tmp_path))
