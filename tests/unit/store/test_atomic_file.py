import os

from raftlog.store.atomic_file import read_file, write_atomically
from raftlog.store.filesystem import OsFileSystem


def test_write_then_read(tmp_path) -> None:
    fs = OsFileSystem()
    path = os.path.join(tmp_path, "config", "x.json")
    assert read_file(fs, path) is None
    write_atomically(fs, path, b"first version, long")
    write_atomically(fs, path, b"second")
    assert read_file(fs, path) == b"second"
    assert fs.listdir(os.path.dirname(path)) == ["x.json"]


def test_leftover_temp_file_is_ignored_and_overwritten(tmp_path) -> None:
    fs = OsFileSystem()
    path = os.path.join(tmp_path, "x.json")
    write_atomically(fs, path, b"good")
    # A crash after writing the temporary file but before the rename.
    with open(path + ".tmp", "wb") as f:
        f.write(b"a much longer torn temporary content")
    assert read_file(fs, path) == b"good"
    write_atomically(fs, path, b"new")
    assert read_file(fs, path) == b"new"
