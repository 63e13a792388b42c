"""The store's only door to the disk: a small FileSystem seam and its real implementation.

Rules this module keeps:
- Every store module does file I/O through ``FileSystem``/``FileHandle``, never ``open()``
  directly, so tests can swap in a simulated disk that loses unsynced bytes on power loss.
- Writes are positional (``pwrite``); nothing relies on a shared file cursor.
- ``sync()`` means the bytes written so far to that file survive power loss. Creating, renaming
  or removing a file is durable only after ``sync_dir()`` of its parent directory.
"""

from __future__ import annotations

import os
import shutil
from typing import Protocol


class FileHandle(Protocol):
    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None: ...

    def pread(self, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset``; fewer only at end of file."""
        ...

    def sync(self) -> None: ...

    def truncate(self, size: int) -> None: ...

    def size(self) -> int: ...

    def close(self) -> None: ...


class FileSystem(Protocol):
    def open(self, path: str, create: bool = True) -> FileHandle:
        """Open for reading and writing; create when missing if ``create``, else raise
        FileNotFoundError."""
        ...

    def exists(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]:
        """Names in ``path``, sorted; empty when the directory does not exist."""
        ...

    def makedirs(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def remove_tree(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None:
        """Atomic replace of ``target`` by ``source`` (POSIX rename)."""
        ...

    def sync_dir(self, path: str) -> None: ...

    def file_size(self, path: str) -> int: ...

    def disk_usage_ratio(self, path: str) -> float:
        """Fraction of the disk holding ``path`` that is in use, 0.0 to 1.0."""
        ...


class OsFileHandle:
    """A file descriptor with positional I/O. Not thread-safe for truncate vs. write; the
    store serialises writers per file."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: str, create: bool) -> None:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self._fd = os.open(path, flags, 0o644)
        self.path = path

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view = view[written:]
            offset += written

    def pread(self, size: int, offset: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class OsFileSystem:
    """The real disk."""

    def open(self, path: str, create: bool = True) -> OsFileHandle:
        return OsFileHandle(path, create)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        os.remove(path)

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def sync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def file_size(self, path: str) -> int:
        return os.path.getsize(path)

    def disk_usage_ratio(self, path: str) -> float:
        usage = shutil.disk_usage(path)
        return usage.used / usage.total if usage.total else 0.0
