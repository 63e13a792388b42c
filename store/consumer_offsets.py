"""Consumer offsets: per consumer group and topic/queue, the next queue offset to consume.

Rules this module keeps:
- An offset is a ``queue_offset`` (units in a ConsumeQueue), never a physical offset.
- Persisted as JSON under ``<root>/config/consumer_offsets.json`` with an atomic replace, so a
  crash leaves either the previous or the new table, never a torn one.
- Committing is idempotent and may move an offset backwards (a consumer rewinding on purpose).
- A group is a non-empty str and an offset an int in [0, 2**63); anything else is refused
  before the table changes. A table file of another shape fails the load with a ValueError
  naming the file.
- ``replace_all`` (a Raft follower installing its leader's tables with a snapshot) checks the
  whole new table, then writes it durably and swaps it in; ``write_consumer_offsets`` writes
  the same file for a store that is not open.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from raftlog.store.atomic_file import read_json_document, write_json_document
from raftlog.store.errors import InvalidOffsetError
from raftlog.store.filesystem import FileSystem
from raftlog.store.validation import validate_group

CONSUMER_OFFSETS_FILE = os.path.join("config", "consumer_offsets.json")
_FORMAT_VERSION = 1
_INT64_MAX = 2**63 - 1


class ConsumerOffsets:
    """The table of committed consumer offsets, loaded at open and saved on ``persist``."""

    def __init__(self, fs: FileSystem, root_dir: str) -> None:
        self._fs = fs
        self._path = os.path.join(root_dir, CONSUMER_OFFSETS_FILE)
        self._lock = threading.Lock()
        self._offsets: dict[tuple[str, str, int], int] = {}
        self._dirty = False
        self._load()

    def commit(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        """Record ``queue_offset`` as the next one ``group`` consumes from ``topic``/``queue_id``
        (in memory; ``persist`` makes it durable)."""
        validate_group(group)
        _check_offset(queue_offset)
        with self._lock:
            key = (group, topic, queue_id)
            if self._offsets.get(key) != queue_offset:
                self._offsets[key] = queue_offset
                self._dirty = True

    @staticmethod
    def check_all(offsets: Mapping[tuple[str, str, int], int]) -> None:
        """The store's error for a group or offset ``replace_all(offsets)`` would refuse."""
        for (group, _, _), queue_offset in offsets.items():
            validate_group(group)
            _check_offset(queue_offset)

    def replace_all(self, offsets: Mapping[tuple[str, str, int], int]) -> None:
        """Make the table exactly ``offsets`` (``{(group, topic, queue_id): next queue
        offset}``), durable when it returns; all are checked before anything changes
        (``check_all``)."""
        self.check_all(offsets)
        updated = dict(offsets)
        with self._lock:
            # Written before it is applied: the table never claims what the disk lacks.
            _write(self._fs, self._path, updated)
            self._offsets = updated
            self._dirty = False

    def fetch(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed next queue offset, or None when ``group`` never committed one."""
        with self._lock:
            return self._offsets.get((group, topic, queue_id))

    def groups(self) -> list[str]:
        with self._lock:
            return sorted({group for group, _, _ in self._offsets})

    def offsets_of_group(self, group: str) -> dict[tuple[str, int], int]:
        """``{(topic, queue_id): next queue offset}`` for one group."""
        with self._lock:
            return {(t, q): o for (g, t, q), o in self._offsets.items() if g == group}

    def persist(self) -> None:
        """Write the table atomically if it changed since the last write."""
        with self._lock:
            if not self._dirty:
                return
            _write(self._fs, self._path, self._offsets)
            self._dirty = False

    def _load(self) -> None:
        document = read_json_document(self._fs, self._path, _FORMAT_VERSION)
        if document is None:
            return
        offsets: dict[tuple[str, str, int], int] = {}
        try:
            for group, topics in document["offsets"].items():
                for topic, queues in topics.items():
                    for queue_id, queue_offset in queues.items():
                        if type(queue_offset) is not int or not 0 <= queue_offset <= _INT64_MAX:
                            raise ValueError(f"queue offset {queue_offset!r}")
                        offsets[(group, topic, int(queue_id))] = queue_offset
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise ValueError(f"{self._path}: not a valid offsets table: {error!r}") from error
        self._offsets = offsets


def write_consumer_offsets(
    fs: FileSystem, root_dir: str, offsets: Mapping[tuple[str, str, int], int]
) -> None:
    """Replace the table file under ``root_dir`` by ``offsets``, durably, for a store that is
    not open (its next open loads and checks it)."""
    _write(fs, os.path.join(root_dir, CONSUMER_OFFSETS_FILE), offsets)


def _write(fs: FileSystem, path: str, offsets: Mapping[tuple[str, str, int], int]) -> None:
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for (group, topic, queue_id), queue_offset in offsets.items():
        nested.setdefault(group, {}).setdefault(topic, {})[str(queue_id)] = queue_offset
    write_json_document(fs, path, _FORMAT_VERSION, {"offsets": nested})


def _check_offset(queue_offset: int) -> None:
    if type(queue_offset) is not int or not 0 <= queue_offset <= _INT64_MAX:
        raise InvalidOffsetError(f"queue offset must be in [0, 2**63), got {queue_offset!r}")
