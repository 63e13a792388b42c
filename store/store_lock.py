"""One process per store directory, and a record of whether the last one stopped cleanly.

- ``StoreLock``: an exclusive, non-blocking ``fcntl.flock`` on ``<root>/lock``. The OS drops
  the lock when the process dies, so a crash never leaves a stale lock. This is the one store
  module that uses ``os`` directly instead of the FileSystem seam: a lock only means something
  between real processes, and a simulated disk has none.
- ``AbortMarker``: ``<root>/abort`` exists while a store is open. Finding it at open means the
  previous process did not close cleanly, so recovery must verify the CommitLog's tail.

Rules this module keeps:
- A second process (or a second StoreLock in the same process: flock locks belong to the open
  file description) is refused with StoreLockedError naming the path.
- The abort marker is created (and made durable: file fsync and directory fsync) before the
  store takes writes, and removed only after everything was flushed at close.
"""

from __future__ import annotations

import fcntl
import os
from types import TracebackType

from raftlog.store.errors import StoreLockedError
from raftlog.store.filesystem import FileSystem

LOCK_FILE_NAME = "lock"
ABORT_FILE_NAME = "abort"


class StoreLock:
    def __init__(self, root_dir: str) -> None:
        self.path = os.path.join(root_dir, LOCK_FILE_NAME)
        self._root_dir = root_dir
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise StoreLockedError at once (never waits)."""
        if self._fd is not None:
            return
        os.makedirs(self._root_dir, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            os.close(fd)
            raise StoreLockedError(
                f"store directory {self._root_dir} is in use by another process (lock {self.path})"
            ) from error
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            # Closing the descriptor releases the flock.
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


class AbortMarker:
    def __init__(self, fs: FileSystem, root_dir: str) -> None:
        self._fs = fs
        self._root_dir = root_dir
        self.path = f"{root_dir}/{ABORT_FILE_NAME}"
        self._found_at_create: bool | None = None

    def was_unclean_stop(self) -> bool:
        """Whether the previous process left its marker behind: as found by ``create()``, or
        as the disk says now if ``create()`` was not called yet."""
        if self._found_at_create is not None:
            return self._found_at_create
        return self._fs.exists(self.path)

    def create(self) -> None:
        """Mark the store as running (durably), remembering whether a marker was left over."""
        self._found_at_create = self._fs.exists(self.path)
        self._fs.makedirs(self._root_dir)
        handle = self._fs.open(self.path, create=True)
        try:
            handle.sync()
        finally:
            handle.close()
        self._fs.sync_dir(self._root_dir)

    def remove(self) -> None:
        """Mark a clean stop: call only after everything was flushed."""
        if self._fs.exists(self.path):
            self._fs.remove(self.path)
            self._fs.sync_dir(self._root_dir)
