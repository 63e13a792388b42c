"""Topics and their queue counts, persisted under ``<root>/config/topics.json``.

Rules this module keeps:
- A topic name must pass ``validation.validate_topic`` (1..127 characters from
  ``[%|a-zA-Z0-9_-]``); anything else raises ``InvalidTopicError`` before the table changes.
- A topic's queue count may grow (new queues start empty) but never shrink: queues hold data.
- Every change is written atomically (temporary file, fsync, rename, fsync directory) before
  ``create_topic`` returns, so a created topic survives a crash.
- ``replace_all`` (a Raft follower installing its leader's tables with a snapshot) replaces
  the table wholesale, outside the grow-only rule (the leader's table comes from a longer
  prefix of the same log, so in practice it only adds and grows): every entry is checked
  first, then the table is written and swapped in at once. ``write_topic_table`` writes the
  same file for a store that is not open.
- A table file that does not hold what this module writes (a bad name or count, a wrong
  shape) fails the load with a ValueError naming the file, never a half-loaded table.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raftlog.store.atomic_file import read_json_document, write_json_document
from raftlog.store.errors import InvalidQueueIdError, InvalidTopicError, UnknownTopicError
from raftlog.store.filesystem import FileSystem
from raftlog.store.validation import Limits, validate_topic

TOPICS_FILE = os.path.join("config", "topics.json")
MAX_QUEUE_COUNT = 65536
_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    queue_count: int


class TopicTable:
    """The store's topics. Thread-safe."""

    def __init__(self, fs: FileSystem, root_dir: str, limits: Limits) -> None:
        self._fs = fs
        self._limits = limits
        self._path = os.path.join(root_dir, TOPICS_FILE)
        self._lock = threading.Lock()
        self._topics: dict[str, TopicConfig] = {}
        self._load()

    def create_topic(self, topic: str, queue_count: int) -> TopicConfig:
        """Create ``topic`` with ``queue_count`` queues, or grow an existing topic to that many.
        Idempotent for the same count."""
        return self.create_topics([(topic, queue_count)])[0]

    def create_topics(self, topics: Sequence[tuple[str, int]]) -> list[TopicConfig]:
        """``create_topic`` for many ``(topic, queue_count)`` pairs with one durable write; all
        are checked before any is applied."""
        with self._lock:
            updated = dict(self._topics)
            configs = []
            for topic, queue_count in topics:
                validate_topic(topic, self._limits)
                _check_queue_count(queue_count)
                existing = updated.get(topic)
                if existing is not None and queue_count < existing.queue_count:
                    raise InvalidQueueIdError(
                        f"topic {topic!r} has {existing.queue_count} queues; cannot shrink to "
                        f"{queue_count}"
                    )
                updated[topic] = TopicConfig(topic, queue_count)
                configs.append(updated[topic])
            if updated != self._topics:
                # Written before it is applied: the table never claims what the disk lacks.
                self._persist(updated)
                self._topics = updated
            return configs

    def check_all(self, topics: Mapping[str, int]) -> None:
        """InvalidTopicError or InvalidQueueIdError when ``replace_all(topics)`` would refuse
        them."""
        for topic, queue_count in topics.items():
            validate_topic(topic, self._limits)
            _check_queue_count(queue_count)

    def replace_all(self, topics: Mapping[str, int]) -> None:
        """Make the table exactly ``topics`` (name -> queue count), durably; every entry is
        checked before anything changes (``check_all``)."""
        self.check_all(topics)
        with self._lock:
            updated = {name: TopicConfig(name, count) for name, count in topics.items()}
            self._persist(updated)
            self._topics = updated

    def get(self, topic: str) -> TopicConfig | None:
        return self._topics.get(topic)

    def describe(self, topic: str) -> TopicConfig:
        config = self._topics.get(topic)
        if config is None:
            raise UnknownTopicError(f"topic {topic!r} does not exist")
        return config

    def list_topics(self) -> list[TopicConfig]:
        with self._lock:
            return sorted(self._topics.values(), key=lambda config: config.name)

    def _persist(self, topics: dict[str, TopicConfig]) -> None:
        _write(self._fs, self._path, {name: c.queue_count for name, c in topics.items()})

    def _load(self) -> None:
        document = read_json_document(self._fs, self._path, _FORMAT_VERSION)
        if document is None:
            return
        try:
            for name, fields in document["topics"].items():
                queue_count = fields["queue_count"]
                if type(queue_count) is not int or not 1 <= queue_count <= MAX_QUEUE_COUNT:
                    raise ValueError(f"topic {name!r} has queue count {queue_count!r}")
                validate_topic(name, self._limits)
                self._topics[name] = TopicConfig(name, queue_count)
        except (KeyError, TypeError, AttributeError, ValueError, InvalidTopicError) as error:
            raise ValueError(f"{self._path}: not a valid topic table: {error!r}") from error


def write_topic_table(fs: FileSystem, root_dir: str, topics: Mapping[str, int]) -> None:
    """Replace the table file under ``root_dir`` by ``topics`` (name -> queue count), durably,
    for a store that is not open (its next open loads and checks it)."""
    _write(fs, os.path.join(root_dir, TOPICS_FILE), topics)


def _write(fs: FileSystem, path: str, topics: Mapping[str, int]) -> None:
    body = {"topics": {name: {"queue_count": count} for name, count in topics.items()}}
    write_json_document(fs, path, _FORMAT_VERSION, body)


def _check_queue_count(queue_count: int) -> None:
    if type(queue_count) is not int or not 1 <= queue_count <= MAX_QUEUE_COUNT:
        raise InvalidQueueIdError(
            f"queue count must be an int in 1..{MAX_QUEUE_COUNT}, got {queue_count!r}"
        )
