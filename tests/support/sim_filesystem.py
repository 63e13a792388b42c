"""SimFileSystem: an in-memory FileSystem that can lose power.

Model (simple, and honest about what a real disk may do):
- Each file (an inode) has *durable* bytes and a list of unsynced operations (writes and
  truncates) applied to its *current* bytes. ``sync()`` makes current durable.
- Directory entries are the same: creating, renaming or removing a file changes the current
  namespace; the durable namespace of a directory catches up only on ``sync_dir(directory)``.
  Directories themselves are always durable (``makedirs`` is not modelled as losable).
- ``power_loss(rng)``: every file goes back to its durable bytes plus a random, in-order
  prefix of its unsynced operations, the last kept write possibly torn (a prefix of its bytes,
  and sometimes the file extended with zeros over the rest, as a file system that updated the
  size before the data would leave it). The namespace goes back to the durable one. Every open
  handle becomes invalid (OSError), as after a reboot.
- ``fail_syncs``: make the next ``sync`` calls raise EIO (fault injection).
- ``capacity_bytes`` (None: unbounded): the disk holds at most this many bytes of file
  contents. A write that would grow them past it writes the part that fits, as a real
  ``write(2)`` returns short, then raises ENOSPC (a full disk, mid-write); shrinking a file
  frees space at once. ``disk_usage_ratio`` stays ``usage_ratio`` whatever the capacity, so
  watermarks and ENOSPC can be tested apart.
- Counters (``sync_count``, ``open_handles``) let tests prove group commit and handle bounds.

Thread-safe: one lock around every operation, so the store's flusher thread can use it.
"""

from __future__ import annotations

import errno
import posixpath
import random
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class _Inode:
    durable: bytearray = field(default_factory=bytearray)
    current: bytearray = field(default_factory=bytearray)
    # ("write", offset, data) or ("truncate", size, b"")
    pending: list[tuple[str, int, bytes]] = field(default_factory=list)


def _apply(data: bytearray, op: tuple[str, int, bytes]) -> None:
    kind, position, payload = op
    if kind == "truncate":
        del data[position:]
        data.extend(bytes(max(0, position - len(data))))
        return
    if not payload:
        return
    if len(data) < position:
        data.extend(bytes(position - len(data)))
    data[position : position + len(payload)] = payload


class SimFileHandle:
    def __init__(self, fs: SimFileSystem, path: str, inode: _Inode, generation: int) -> None:
        self._fs = fs
        self.path = path
        self._inode = inode
        self._generation = generation
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise OSError(errno.EBADF, f"{self.path}: handle is closed")
        if self._generation != self._fs.generation:
            raise OSError(errno.EIO, f"{self.path}: handle from before a power loss")

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        with self._fs.lock:
            self._check()
            payload = bytes(data)
            fitting = self._fs.bytes_that_fit(len(self._inode.current), offset, len(payload))
            op = ("write", offset, payload[:fitting])
            self._inode.pending.append(op)
            _apply(self._inode.current, op)
            if fitting < len(payload):
                raise OSError(
                    errno.ENOSPC,
                    f"{self.path}: no space left on device (wrote {fitting} of "
                    f"{len(payload)} bytes)",
                )

    def pread(self, size: int, offset: int) -> bytes:
        with self._fs.lock:
            self._check()
            return bytes(self._inode.current[offset : offset + size])

    def sync(self) -> None:
        with self._fs.lock:
            self._check()
            self._fs.sync_count[self.path] += 1
            if self._fs.fail_syncs > 0:
                self._fs.fail_syncs -= 1
                raise OSError(errno.EIO, f"{self.path}: injected fsync failure")
            self._inode.durable = bytearray(self._inode.current)
            self._inode.pending.clear()

    def truncate(self, size: int) -> None:
        with self._fs.lock:
            self._check()
            op = ("truncate", size, b"")
            self._inode.pending.append(op)
            _apply(self._inode.current, op)

    def size(self) -> int:
        with self._fs.lock:
            self._check()
            return len(self._inode.current)

    def close(self) -> None:
        with self._fs.lock:
            if not self._closed:
                self._closed = True
                self._fs.open_handles -= 1


class SimFileSystem:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._files: dict[str, _Inode] = {}
        self._durable_files: dict[str, _Inode] = {}
        self._dirs: set[str] = {"/"}
        self.generation = 0
        self.sync_count: Counter[str] = Counter()
        self.dir_sync_count: Counter[str] = Counter()
        self.open_handles = 0
        self.max_open_handles = 0
        self.fail_syncs = 0
        self.usage_ratio = 0.1
        self.capacity_bytes: int | None = None

    @staticmethod
    def _norm(path: str) -> str:
        return posixpath.normpath("/" + path.lstrip("/"))

    def open(self, path: str, create: bool = True) -> SimFileHandle:
        path = self._norm(path)
        with self.lock:
            inode = self._files.get(path)
            if inode is None:
                if not create:
                    raise FileNotFoundError(errno.ENOENT, "no such file", path)
                if posixpath.dirname(path) not in self._dirs:
                    raise FileNotFoundError(errno.ENOENT, "no such directory", path)
                inode = self._files[path] = _Inode()
            self.open_handles += 1
            self.max_open_handles = max(self.max_open_handles, self.open_handles)
            return SimFileHandle(self, path, inode, self.generation)

    def exists(self, path: str) -> bool:
        path = self._norm(path)
        with self.lock:
            return path in self._files or path in self._dirs

    def listdir(self, path: str) -> list[str]:
        path = self._norm(path)
        with self.lock:
            names = {
                posixpath.basename(p)
                for p in [*self._files, *self._dirs]
                if p != "/" and posixpath.dirname(p) == path
            }
            return sorted(names)

    def makedirs(self, path: str) -> None:
        path = self._norm(path)
        with self.lock:
            while path not in self._dirs:
                self._dirs.add(path)
                path = posixpath.dirname(path)

    def remove(self, path: str) -> None:
        path = self._norm(path)
        with self.lock:
            if path not in self._files:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            del self._files[path]

    def remove_tree(self, path: str) -> None:
        path = self._norm(path)
        with self.lock:
            prefix = path + "/"
            for name in [p for p in self._files if p.startswith(prefix)]:
                del self._files[name]
            self._dirs = {d for d in self._dirs if d != path and not d.startswith(prefix)}

    def rename(self, source: str, target: str) -> None:
        source, target = self._norm(source), self._norm(target)
        with self.lock:
            if source not in self._files:
                raise FileNotFoundError(errno.ENOENT, "no such file", source)
            self._files[target] = self._files.pop(source)

    def sync_dir(self, path: str) -> None:
        path = self._norm(path)
        with self.lock:
            self.dir_sync_count[path] += 1
            for name in [p for p in self._durable_files if posixpath.dirname(p) == path]:
                del self._durable_files[name]
            for name, inode in self._files.items():
                if posixpath.dirname(name) == path:
                    self._durable_files[name] = inode

    def file_size(self, path: str) -> int:
        path = self._norm(path)
        with self.lock:
            inode = self._files.get(path)
            if inode is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            return len(inode.current)

    def disk_usage_ratio(self, path: str) -> float:
        return self.usage_ratio

    def used_bytes(self) -> int:
        """Bytes of file contents the disk holds now (what ``capacity_bytes`` bounds)."""
        with self.lock:
            return sum(len(inode.current) for inode in self._files.values())

    def bytes_that_fit(self, file_size: int, offset: int, size: int) -> int:
        """How many of ``size`` bytes written at ``offset`` into a file of ``file_size``
        bytes fit within ``capacity_bytes`` (all of them when it is None)."""
        if self.capacity_bytes is None:
            return size
        free = self.capacity_bytes - self.used_bytes()
        # Bytes below the file's end overwrite what it holds: they need no space.
        overwritten = max(0, min(size, file_size - offset))
        growth_room = max(0, free - max(0, offset - file_size))
        return min(size, overwritten + growth_room)

    # ------------------------------------------------------------ test helpers

    def read_bytes(self, path: str) -> bytes:
        with self.lock:
            return bytes(self._files[self._norm(path)].current)

    def corrupt(self, path: str, position: int, data: bytes) -> None:
        """Overwrite bytes as the disk holds them (durable and current), bypassing handles."""
        with self.lock:
            inode = self._files[self._norm(path)]
            for image in (inode.durable, inode.current):
                _apply(image, ("write", position, data))

    def write_back(self) -> None:
        """The OS flushes everything on its own (page cache writeback): every file's current
        bytes and the current namespace become durable, as if each were synced."""
        with self.lock:
            for inode in self._files.values():
                inode.durable = bytearray(inode.current)
                inode.pending.clear()
            self._durable_files = dict(self._files)

    def power_loss(self, rng: random.Random, torn: bool = True) -> None:
        """Lose unsynced data and directory changes (see the module docstring); with ``torn``
        False, every unsynced operation is lost (none lands partly)."""
        with self.lock:
            self.generation += 1
            self.open_handles = 0
            inodes = {
                id(inode): inode for inode in [*self._files.values(), *self._durable_files.values()]
            }
            for inode in inodes.values():
                image = bytearray(inode.durable)
                kept = rng.randint(0, len(inode.pending)) if torn else 0
                for op in inode.pending[:kept]:
                    _apply(image, op)
                if torn and kept < len(inode.pending) and inode.pending[kept][0] == "write":
                    _, position, payload = inode.pending[kept]
                    cut = payload[: rng.randint(0, len(payload))]
                    if rng.random() < 0.3:
                        cut += bytes(len(payload) - len(cut))
                    _apply(image, ("write", position, cut))
                inode.durable = image
                inode.current = bytearray(image)
                inode.pending.clear()
            self._files = dict(self._durable_files)
