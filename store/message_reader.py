"""MessageReader: the read half of the store behind MessageStore -- pulls from a queue by
queue offset (decoded records, or the stored bytes for the fast pull), lookups by key, by
time and by offset message id, and each queue's offset bounds.

Rules this module keeps:
- Readers see only dispatched records (``physical offset < dispatched offset``) and never
  below the CommitLog's first offset (retention).
- A tag filter picks units by tag hash, then re-checks the real tag (hashes collide).
- Reads racing a retention pass start again past what it deleted; a unit that points at no
  record without a deletion is damaged derived data (CorruptRecordError), not a bad argument.
- Every argument is checked before use and refused with the StoreError for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from raftlog.store.commit_log import CommitLog
from raftlog.store.consume_queue import ConsumeQueue, ConsumeQueueUnit
from raftlog.store.dispatcher import Dispatcher
from raftlog.store.errors import (
    CorruptRecordError,
    InvalidArgumentError,
    InvalidMessageIdError,
    InvalidOffsetError,
    InvalidQueueIdError,
)
from raftlog.store.hashing import tag_hash
from raftlog.store.index_file import IndexService
from raftlog.store.message_id import decode_message_id
from raftlog.store.record import (
    PROPERTY_UNIQ_KEY,
    MessageRecord,
    read_dispatch_info,
    read_store_timestamp_ms,
)
from raftlog.store.topic_config import TopicTable

# A tag-filtered read inspects at most this many units before returning what it found.
MAX_UNITS_SCANNED_PER_GET = 16384
_UNITS_READ_PER_CHUNK = 1024
_ALL_TAGS = "*"
# What one chunk of a queue read yields per chosen unit: a decoded record or its bytes.
_Item = TypeVar("_Item", MessageRecord, memoryview)
_Result = TypeVar("_Result")


@dataclass(frozen=True, slots=True)
class GetResult:
    """Messages read from one queue; iterate it for the records. ``next_queue_offset`` is where
    the next read continues (past messages the tag filter skipped)."""

    messages: list[MessageRecord]
    next_queue_offset: int
    min_queue_offset: int
    max_queue_offset: int

    def __iter__(self) -> Iterator[MessageRecord]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)


@dataclass(frozen=True, slots=True)
class RecordBytes:
    """Records read from one queue as stored (``get_record_bytes``): ``records`` holds
    ``count`` records back to back in queue-offset order; the offsets are ``GetResult``'s."""

    records: bytes
    count: int
    next_queue_offset: int
    min_queue_offset: int
    max_queue_offset: int


def _record_tags(record: MessageRecord) -> str:
    return record.tags


def _record_bytes_tags(record: memoryview) -> str:
    return read_dispatch_info(record).tags


class MessageReader:
    """Answers the reads of one store (``MessageStore`` owns it)."""

    def __init__(
        self,
        *,
        topics: TopicTable,
        commit_log: CommitLog,
        index: IndexService,
        dispatcher: Callable[[], Dispatcher],
        consume_queue: Callable[[str, int], ConsumeQueue],
        now_ms: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._commit_log = commit_log
        self._index = index
        # A callable: the dispatcher is built after the reader (recovery needs the store).
        self._dispatcher_of = dispatcher
        self._consume_queue = consume_queue
        self._now_ms = now_ms

    @property
    def _dispatcher(self) -> Dispatcher:
        return self._dispatcher_of()

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_messages: int = 32,
        max_bytes: int = 4 * 1024 * 1024,
        tag: str | frozenset[str] | None = None,
        max_units_scanned: int = MAX_UNITS_SCANNED_PER_GET,
    ) -> GetResult:
        """Up to ``max_messages`` messages (and about ``max_bytes``; at least one) from
        ``queue_offset`` on. With ``tag`` (one tag, or a set: any of them), only messages with
        that tag: units are filtered by tag hash, then the real tag is re-checked (hashes
        collide). At most ``max_units_scanned`` units are looked at."""
        tags = frozenset((tag,)) if isinstance(tag, str) and tag != _ALL_TAGS else None
        if isinstance(tag, frozenset):
            tags = tag
        messages, next_queue_offset, min_queue_offset, max_queue_offset = self._read_queue(
            topic,
            queue_id,
            queue_offset,
            max_messages,
            max_bytes,
            tags,
            max_units_scanned,
            self._commit_log.read_records,
            _record_tags,
        )
        return GetResult(messages, next_queue_offset, min_queue_offset, max_queue_offset)

    def get_record_bytes(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_messages: int,
        max_bytes: int,
        tags: frozenset[str] | None = None,
        max_units_scanned: int = MAX_UNITS_SCANNED_PER_GET,
    ) -> RecordBytes:
        """What ``get_messages`` would return, as the records' stored bytes back to back (the
        fast pull: no decoding, no CRC work here; the reader verifies). ``tags``: only
        messages whose tag is one of these (hashes on the units, then the real tag). At most
        ``max_units_scanned`` units are looked at."""
        views, next_queue_offset, min_queue_offset, max_queue_offset = self._read_queue(
            topic,
            queue_id,
            queue_offset,
            max_messages,
            max_bytes,
            tags,
            max_units_scanned,
            self._commit_log.read_record_bytes,
            _record_bytes_tags,
        )
        return RecordBytes(
            b"".join(views), len(views), next_queue_offset, min_queue_offset, max_queue_offset
        )

    def _read_queue(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_messages: int,
        max_bytes: int,
        tags: frozenset[str] | None,
        max_units_scanned: int,
        read: Callable[[Sequence[tuple[int, int]]], list[_Item]],
        tags_of: Callable[[_Item], str],
    ) -> tuple[list[_Item], int, int, int]:
        """(items ``read`` gave for the chosen units, the next queue offset, the queue's min
        and max offsets). Units are chosen by tag hash, counted against the limits, and read
        one chunk at a time; ``tags_of`` re-checks the real tag (hashes collide)."""
        queue = self.check_queue(topic, queue_id)
        if type(queue_offset) is not int or queue_offset < 0:
            raise InvalidOffsetError(f"queue offset must be an int >= 0, got {queue_offset!r}")
        if max_messages < 1 or max_units_scanned < 1:
            raise InvalidArgumentError(
                f"max_messages ({max_messages}) and max_units_scanned ({max_units_scanned}) "
                "must be at least 1"
            )

        def read_units() -> tuple[list[_Item], int, int, int]:
            min_queue_offset = self._first_live_queue_offset(queue)
            max_queue_offset = queue.max_queue_offset
            wanted_hashes = None if tags is None else frozenset(map(tag_hash, tags))
            next_queue_offset = max(queue_offset, min_queue_offset)
            scan_end = min(max_queue_offset, next_queue_offset + max_units_scanned)
            found: list[_Item] = []
            size_bytes = 0
            while next_queue_offset < scan_end and len(found) < max_messages:
                units = queue.read(
                    next_queue_offset, min(_UNITS_READ_PER_CHUNK, scan_end - next_queue_offset)
                )
                if not units:
                    break
                # Pick this chunk's candidates from the units alone, then read them in one batch.
                places: list[tuple[int, int]] = []
                wanted = max_messages - len(found)
                min_physical_offset = self._commit_log.min_offset
                for physical_offset, unit_size_bytes, unit_tag_hash in units:
                    if (
                        wanted_hashes is not None and unit_tag_hash not in wanted_hashes
                    ) or physical_offset < min_physical_offset:
                        # Another tag, or a record retention deleted since the read began.
                        next_queue_offset += 1
                        continue
                    if (found or places) and size_bytes + unit_size_bytes > max_bytes:
                        scan_end = next_queue_offset
                        break
                    places.append((physical_offset, unit_size_bytes))
                    size_bytes += unit_size_bytes
                    next_queue_offset += 1
                    if len(places) == wanted:
                        break
                items = read(places)
                if tags is None:
                    found += items
                else:
                    # A tag-hash collision is dropped; its bytes still count against max_bytes.
                    found += [item for item in items if tags_of(item) in tags]
            return found, next_queue_offset, min_queue_offset, max_queue_offset

        # Retention may delete records under the read: it then starts again past them.
        return self._despite_retention(read_units)

    def query_by_key(
        self,
        topic: str,
        key: str,
        begin_ms: int = 0,
        end_ms: int | None = None,
        max_results: int = 32,
    ) -> list[MessageRecord]:
        """Messages of ``topic`` whose KEYS hold ``key`` or whose UNIQ_KEY is ``key``, stored
        within ``[begin_ms, end_ms]``, newest first."""
        self._topics.describe(topic)
        end_ms = end_ms if end_ms is not None else self._now_ms()
        if not isinstance(key, str) or not key:
            raise InvalidArgumentError(f"the key to look up must be a non-empty str, got {key!r}")
        if end_ms < begin_ms:
            raise InvalidArgumentError(
                f"time window [{begin_ms}, {end_ms}] is inverted: end_ms is before begin_ms"
            )
        if max_results < 1:
            raise InvalidArgumentError(f"max_results must be at least 1, got {max_results}")
        # Hash collisions are filtered below: ask for some spare candidates.
        candidates = self._index.query(topic, key, begin_ms, end_ms, 2 * max_results + 16)
        found: list[MessageRecord] = []
        for physical_offset in candidates:
            if not self._is_visible(physical_offset):
                continue
            try:
                record = self._commit_log.read_record(physical_offset)
            except InvalidOffsetError:
                if physical_offset >= self._commit_log.min_offset:
                    raise
                continue  # retention deleted it since the visibility check
            if (
                record.topic == topic
                and begin_ms <= record.store_timestamp_ms <= end_ms
                and (key in record.keys or record.get_property(PROPERTY_UNIQ_KEY) == key)
            ):
                found.append(record)
                if len(found) == max_results:
                    break
        return found

    def queue_offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms``
        (the max queue offset when none was)."""
        queue = self.check_queue(topic, queue_id)
        return self._despite_retention(
            lambda: queue.queue_offset_for_time(
                timestamp_ms, self._first_live_queue_offset(queue), self._store_timestamp_ms_of
            )
        )

    def get_by_message_id(self, msg_id: str) -> MessageRecord:
        """The message an offset message id names (valid on every replica)."""
        _, physical_offset = decode_message_id(msg_id)
        if not self._is_visible(physical_offset):
            raise InvalidMessageIdError(
                f"message id {msg_id} points at physical offset {physical_offset}, outside the "
                f"visible log [{self._commit_log.min_offset}, "
                f"{self._dispatcher.dispatched_physical_offset})"
            )
        try:
            return self._commit_log.read_record(physical_offset)
        except (CorruptRecordError, InvalidOffsetError) as error:
            raise InvalidMessageIdError(
                f"message id {msg_id}: no record starts at physical offset {physical_offset}"
            ) from error

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._first_live_queue_offset(self.check_queue(topic, queue_id))

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset to become visible."""
        return self.check_queue(topic, queue_id).max_queue_offset

    def _is_visible(self, physical_offset: int) -> bool:
        return (
            self._commit_log.min_offset
            <= physical_offset
            < self._dispatcher.dispatched_physical_offset
        )

    def _despite_retention(self, read: Callable[[], _Result]) -> _Result:
        """``read()`` of records through ConsumeQueue units, again if retention deleted a
        segment under it (InvalidOffsetError while the CommitLog's first offset moved): the
        new attempt starts past what was deleted. Each retry needs another deletion, so the
        loop ends. Without a deletion, a unit pointing at no record is damaged derived data:
        CorruptRecordError, not a bad argument."""
        while True:
            min_offset = self._commit_log.min_offset
            try:
                return read()
            except InvalidOffsetError as error:
                if self._commit_log.min_offset == min_offset:
                    raise CorruptRecordError(
                        f"a ConsumeQueue unit points at no record: {error}"
                    ) from error

    def _first_live_queue_offset(self, queue: ConsumeQueue) -> int:
        """Units pointing below the CommitLog's first offset lost their records to retention."""
        return queue.queue_offset_for_physical_offset(self._commit_log.min_offset)

    def _store_timestamp_ms_of(self, unit: ConsumeQueueUnit) -> int:
        return read_store_timestamp_ms(self._commit_log.read(unit.physical_offset, unit.size_bytes))

    def check_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue_count = self._topics.describe(topic).queue_count
        if not 0 <= queue_id < queue_count:
            raise InvalidQueueIdError(
                f"queue id {queue_id} is outside [0, {queue_count}) for topic {topic!r}"
            )
        return self._consume_queue(topic, queue_id)
