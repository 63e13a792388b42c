"""The store's only door to the disk: a small FileSystem seam and its real implementation.

Rules this module keeps:
- Every store module does file I/O through ``FileSystem``/``FileHandle``, never ``open()``
  directly, so tests can swap in a simulated disk that loses unsynced bytes on power loss.
- Writes are positional (``pwrite``); nothing relies on a shared file cursor.
- ``sync()`` means the bytes written so far to that file survive power loss. Creating, renaming
  or removing a file is durable only after ``sync_dir()`` of its parent directory.
- ``OsFileSystem.sync_filesystems_of(paths)`` is the real disk's bulk form of both: one
  syncfs(2) per filesystem holding the paths makes every file's writes and every directory
  entry on it durable. It is used only where syncfs reports write-back errors (Linux 5.8+),
  so a failed write is never taken for durable; elsewhere it declines and callers fsync
  file by file.
"""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
from collections.abc import Callable, Iterable
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


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's syncfs where it reports write-back errors (Linux 5.8+), else None."""
    if platform.system() != "Linux":
        return None
    try:
        version = tuple(int(part) for part in platform.release().split(".")[:2])
        syncfs: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (ValueError, OSError, AttributeError):
        return None
    return syncfs if version >= (5, 8) else None


_SYNCFS = _load_syncfs()


class OsFileSystem:
    """The real disk."""

    def sync_filesystems_of(self, paths: Iterable[str]) -> bool:
        """Make every write to the filesystems holding ``paths`` durable, files and directory
        entries alike, with one syncfs(2) per filesystem. Returns False, having done nothing
        durable, where syncfs is unavailable or a path vanished meanwhile (then fsync them
        one by one). Raises OSError if write-back failed."""
        if _SYNCFS is None:
            return False
        one_path_per_device: dict[int, str] = {}
        descriptors: list[int] = []
        try:
            for path in paths:
                one_path_per_device.setdefault(os.stat(path).st_dev, path)
            for path in one_path_per_device.values():
                descriptors.append(os.open(path, os.O_RDONLY))
            for fd in descriptors:
                if _SYNCFS(fd) != 0:
                    error = ctypes.get_errno()
                    raise OSError(error, f"syncfs failed: {os.strerror(error)}")
        except FileNotFoundError:
            return False
        finally:
            for fd in descriptors:
                os.close(fd)
        return True

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
