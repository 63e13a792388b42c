"""Broadcast consumption's offsets: kept by each member in a local file, as RocketMQ does.

In broadcast mode every member of a group reads every message, so each member has its own
progress. RocketMQ keeps it on the consumer (``LocalFileOffsetStore``,
``~/.rocketmq_offsets/<clientId>/<group>/offsets.json``) and the broker knows nothing of it;
this module does the same: ``<offsets_dir>/<client_id>/<group>/<topic>.json``. Why local and
not server-side offsets under a derived group (``<group>@<client_id>``):
- it is what a RocketMQ user expects (the broker's group offsets mean clustering progress, and
  a broadcast member's own progress dies with its disk, as it does there);
- members come and go (autoscaling, a new host name per pod): per-member groups on the
  cluster would pile up with nobody to delete them, and ``@`` is not a legal group character;
- a commit is a local write, not a Raft entry per member per interval.
The cost, as in RocketMQ: a member that loses its directory starts like a new one (at the
first live offset); a restarted member with the same client id and directory resumes.

Rules this module keeps:
- The file is replaced atomically (write a temporary file, fsync, rename, fsync the
  directory), so a crash leaves the old offsets or the new ones, never a torn file.
- One member at a time: the store holds an exclusive ``flock`` on ``<topic>.lock`` while
  open, so two consumers with the same client id, group and topic on one host fail at once
  (OffsetsInUseError) instead of overwriting each other's progress. The kernel releases the
  lock when the process dies, so a crash never leaves a stale lock behind.
- A file that cannot be read as offsets raises ValueError naming it: silently starting over
  would re-deliver (or skip) a whole topic.
- Names become path parts only after checking them (no ``/``, no ``..``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path

# The directory when neither the caller nor the environment names one (RocketMQ's
# rocketmq.client.localOffsetStoreDir defaults to ~/.rocketmq_offsets).
OFFSETS_DIR_ENV = "RAFTLOG_OFFSETS_DIR"
DEFAULT_OFFSETS_DIR = "~/.raftlog_offsets"
_FORMAT_VERSION = 1
_CLIENT_ID_PATTERN = re.compile(r"[A-Za-z0-9._@:%|-]{1,128}")


class OffsetsInUseError(RuntimeError):
    """Another consumer (in this process or another on the host) holds these offsets."""


def default_client_id() -> str:
    """The host name: stable across restarts of one host (or one StatefulSet pod), so a
    restarted broadcast member finds its offsets. Several members on one host need their own
    ``client_id``."""
    return socket.gethostname() or "localhost"


def offsets_root(offsets_dir: str | os.PathLike[str] | None) -> Path:
    """``offsets_dir``, else $RAFTLOG_OFFSETS_DIR, else ~/.raftlog_offsets."""
    chosen = offsets_dir if offsets_dir is not None else os.environ.get(OFFSETS_DIR_ENV)
    return Path(os.path.expanduser(chosen or DEFAULT_OFFSETS_DIR))


def _path_part(value: str, what: str) -> str:
    if not _CLIENT_ID_PATTERN.fullmatch(value) or value in (".", ".."):
        raise ValueError(
            f"{what} {value!r} cannot name an offsets file: use 1-128 of [A-Za-z0-9._@:%|-]"
        )
    return value


class LocalOffsetStore:
    """One broadcast member's offsets of one (group, topic): queue id -> the next queue
    offset to consume. Holds the member's lock from construction to ``close``."""

    def __init__(
        self,
        offsets_dir: str | os.PathLike[str] | None,
        client_id: str,
        group: str,
        topic: str,
    ) -> None:
        self.client_id = _path_part(client_id, "client id")
        self.group = _path_part(group, "group")
        self.topic = _path_part(topic, "topic")
        directory = offsets_root(offsets_dir) / self.client_id / self.group
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{self.topic}.json"
        lock_path = directory / f"{self.topic}.lock"
        self._lock_fd: int | None = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise OffsetsInUseError(
                f"broadcast offsets {self.path} are held by another consumer on this host: "
                f"give each member of group {group!r} its own client_id (now {client_id!r})"
            ) from None

    def load(self) -> dict[int, int]:
        """The stored offsets ({} when this member never committed)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            document = json.loads(text)
            if document["version"] != _FORMAT_VERSION or document["topic"] != self.topic:
                raise ValueError(f"version {document['version']}, topic {document['topic']!r}")
            offsets = {int(q): int(o) for q, o in document["offsets"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(
                f"broadcast offsets file {self.path} is not a version-{_FORMAT_VERSION} "
                f"offsets file of topic {self.topic!r} ({error}); move it away to start over"
            ) from None
        if any(q < 0 or o < 0 for q, o in offsets.items()):
            raise ValueError(f"broadcast offsets file {self.path} holds a negative number")
        return offsets

    def save(self, offsets: Mapping[int, int]) -> None:
        """Store ``offsets`` (merged over the stored ones), atomically and durably."""
        if self._lock_fd is None:
            raise ValueError("this offset store is closed")
        merged = {**self.load(), **offsets}
        document = {
            "version": _FORMAT_VERSION,
            "client_id": self.client_id,
            "group": self.group,
            "topic": self.topic,
            "offsets": {str(q): o for q, o in sorted(merged.items())},
        }
        temporary = self.path.with_suffix(".json.tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        directory_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)

    def close(self) -> None:
        """Release the member's lock (the offsets stay on disk)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None
