"""Which node process runs on a data directory, found from what the system says rather than
from what cluster.json remembers (cluster.json may be stale, or rewritten by a failed `up`).

A running node holds an exclusive flock on ``<data_dir>/store/lock`` (store/store_lock.py) for
as long as it runs; Linux lists every flock in /proc/locks with its owner's pid and the
locked file's device and inode.

Rules this module keeps:
- A pid is reported only when it holds that lock AND its command line is ``raftlog ... node
  start`` naming that node id and that data directory: a test process that opened the store
  itself, or any other process, is never reported (so never signalled).
- Read-only: nothing here signals, creates or changes a file.
"""

from __future__ import annotations

import os

from raftlog.testing.node_probes import cmdline

_PROC_LOCKS = "/proc/locks"
# The node's store lock under its data directory: node/config.py STORE_SUBDIR and
# store/store_lock.py LOCK_FILE_NAME, spelt out because chaos (which imports this harness)
# may not import the store (an import contract).
_STORE_SUBDIR = "store"
LOCK_FILE_NAME = "lock"


def lock_holders(path: str) -> set[int]:
    """The pids holding a lock on ``path`` (empty when none, or no /proc/locks)."""
    try:
        status = os.stat(path)
        with open(_PROC_LOCKS) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return set()
    # /proc/locks writes the device as hex major:minor, then the inode in decimal.
    wanted = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
    holders = set()
    for line in lines:
        fields = line.split()
        # "1: FLOCK ADVISORY WRITE <pid> <dev:inode> 0 EOF"; a blocked waiter has "->" first.
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == wanted:
            holders.add(int(fields[4]))
    return holders


def node_pid(data_dir: str, node_id: str) -> int | None:
    """The pid of the raftlog node process ``node_id`` running on ``data_dir``, or None."""
    data_dir = os.path.abspath(data_dir)
    lock_path = os.path.join(data_dir, _STORE_SUBDIR, LOCK_FILE_NAME)
    for pid in sorted(lock_holders(lock_path)):
        words = cmdline(pid).split()
        if (
            any("raftlog" in word for word in words)
            and _flag(words, "--node-id") == node_id
            and _flag(words, "--data-dir") in (data_dir, os.path.relpath(data_dir))
        ):
            return pid
    return None


def _flag(words: list[str], name: str) -> str | None:
    """The value after ``name`` in a command line's words."""
    for index, word in enumerate(words[:-1]):
        if word == name:
            return words[index + 1]
    return None
