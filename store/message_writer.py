"""MessageWriter: the write half of the store behind MessageStore -- a batch validated and
encoded, a producer-encoded block checked, queue offsets, physical offsets, the store time
and CRC trailers stamped in place, and the block appended to the CommitLog.

Rules this module keeps:
- Validation first: a refused batch leaves no byte behind, and a batch is all or nothing.
  A producer-encoded block is verified record by record (structure, body CRC, ``__CRC32#``
  trailer) before anything else.
- Queue offsets are dense per topic/queue: each stamp continues after the last one assigned,
  and offsets count as used only once their bytes reached the CommitLog (``append``) or were
  handed to a replicated writer (``stamp``, the Raft leader's half of a write).
- ``append`` and ``stamp`` run under the store's write lock (the caller holds it); one
  CommitLog append per segment-sized chunk, and the dispatcher is told each written record's
  place, queue offset and hashes (``Dispatcher.expect``) so it need not parse them again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from raftlog.store.commit_log import CommitLog
from raftlog.store.consume_queue import ConsumeQueue
from raftlog.store.dispatcher import Dispatcher
from raftlog.store.errors import CorruptRecordError, InvalidArgumentError, PropertiesTooLargeError
from raftlog.store.hashing import key_hash, unit_tag_hash
from raftlog.store.message import (
    RESERVED_PROPERTY_KEYS,
    BlockEntry,
    DispatchHint,
    Message,
    PutResult,
    encode_message_properties,
    hint_of_properties,
)
from raftlog.store.message_id import message_id_encoder
from raftlog.store.record import (
    encode_unstamped_record,
    pack_address,
    pack_host,
    patch_record,
    read_dispatch_info,
    store_host_matches,
    verify_block,
)
from raftlog.store.topic_config import TopicTable
from raftlog.store.validation import (
    Limits,
    check_message_fields,
    validate_body,
    validate_sizes,
    validate_topic,
)


class MessageWriter:
    """Encodes, checks, stamps and appends for one store (``MessageStore`` owns it)."""

    def __init__(
        self,
        *,
        limits: Limits,
        topics: TopicTable,
        commit_log: CommitLog,
        dispatcher: Callable[[], Dispatcher],
        consume_queue: Callable[[str, int], ConsumeQueue],
        store_host: tuple[str, int],
        now_ms: Callable[[], int],
    ) -> None:
        self._limits = limits
        self._topics = topics
        self._commit_log = commit_log
        # A callable: the dispatcher is built after the writer (recovery needs the store).
        self._dispatcher_of = dispatcher
        self._consume_queue = consume_queue
        self._store_host = store_host
        self._store_address = pack_address(store_host[0])
        self._packed_store_host = pack_host(store_host)
        self._message_id_of = message_id_encoder(store_host)
        self._now_ms = now_ms
        self._next_queue_offsets: dict[tuple[str, int], int] = {}

    @property
    def _dispatcher(self) -> Dispatcher:
        return self._dispatcher_of()

    def forget_queue_offsets(self) -> None:
        """Every next queue offset comes from the ConsumeQueues again (a replaced log)."""
        self._next_queue_offsets.clear()

    def commit_queue_offsets(self, assigned: dict[tuple[str, int], int]) -> None:
        """Queue offsets a ``stamp`` assigned now count as used (a replicated write)."""
        self._next_queue_offsets.update(assigned)

    def check_encoded(
        self, block: bytes | bytearray, hints: list[DispatchHint] | None
    ) -> list[BlockEntry]:
        """Verify and validate a producer-encoded block (see ``MessageStore.put_encoded``)
        without writing it; one ``((topic, queue_id), size_bytes)`` per record, and each
        record's dispatch hint into ``hints`` when given."""
        limits = self._limits
        queue_counts: dict[str, int] = {}
        entries: list[BlockEntry] = []
        position = 0
        for index, record in enumerate(verify_block(block)):
            for name, value in (
                ("queue id", record.queue_id),
                ("born timestamp", record.born_timestamp_ms),
                ("reconsume times", record.reconsume_times),
            ):
                if value < 0:
                    raise CorruptRecordError(f"record {index}: {name} {value} is negative")
            if not store_host_matches(block, position, self._packed_store_host):
                raise CorruptRecordError(
                    f"record {index}: its store host is not of this node's address family; "
                    "send zeros in the IPv4 layout (0.0.0.0:0)"
                )
            position += record.size
            topic = record.topic
            queue_count = queue_counts.get(topic)
            if queue_count is None:
                validate_topic(topic, limits)
                queue_count = queue_counts[topic] = self._topics.describe(topic).queue_count
            validate_sizes(
                topic,
                record.queue_id,
                queue_count,
                record.body_bytes,
                record.properties_bytes,
                limits,
            )
            reserved = [name for name, _ in record.properties if name in RESERVED_PROPERTY_KEYS]
            if len(reserved) != len(set(reserved)):
                # Dispatch would index one value and readers re-check another.
                raise PropertiesTooLargeError(
                    f"record {index}: properties {sorted(reserved)} name TAGS, KEYS or UNIQ_KEY "
                    "more than once"
                )
            entries.append(((topic, record.queue_id), record.size))
            if hints is not None:
                hints.append(hint_of_properties(topic, record.properties))
        return entries

    def encode(
        self, messages: Sequence[Message], hints: list[DispatchHint] | None = None
    ) -> tuple[list[bytes], list[BlockEntry]]:
        """Validate and encode a batch, unstamped (``encode_unstamped_record``); topics are
        checked once per batch. ``hints``, when given, gets each record's dispatch hint."""
        limits = self._limits
        store_address, store_port = self._store_address, self._store_host[1]
        topics: dict[str, tuple[bytes, int]] = {}
        now_ms: int | None = None
        records: list[bytes] = []
        entries: list[BlockEntry] = []
        for message in messages:
            topic = message.topic
            known = topics.get(topic) if isinstance(topic, str) else None
            if known is None:
                # A malformed name is InvalidTopicError, not UnknownTopicError.
                validate_topic(topic, limits)
                known = topics[topic] = (topic.encode(), self._topics.describe(topic).queue_count)
            properties_bytes = encode_message_properties(message)
            born_timestamp_ms = message.born_timestamp_ms
            if born_timestamp_ms is None:
                if now_ms is None:
                    now_ms = self._now_ms()
                born_timestamp_ms = now_ms
            try:
                validate_sizes(
                    topic,
                    message.queue_id,
                    known[1],
                    len(message.body),
                    len(properties_bytes),
                    limits,
                )
                check_message_fields(
                    message.flag,
                    message.sys_flag,
                    born_timestamp_ms,
                    message.born_host[1],
                    message.reconsume_times,
                    message.prepared_transaction_offset,
                )
                record = encode_unstamped_record(
                    known[0],
                    message.queue_id,
                    message.flag,
                    message.sys_flag,
                    born_timestamp_ms,
                    pack_address(message.born_host[0]),
                    message.born_host[1],
                    store_address,
                    store_port,
                    message.reconsume_times,
                    message.prepared_transaction_offset,
                    message.body,
                    properties_bytes,
                )
            except (TypeError, ValueError) as error:
                # The body or the born host is not what it must be (the rest was checked).
                validate_body(message.body)
                raise InvalidArgumentError(f"message to {topic!r}: {error}") from error
            records.append(record)
            entries.append(((topic, message.queue_id), len(record)))
            if hints is not None:
                key_hashes = tuple([key_hash(topic, key) for key in message.keys])
                if message.uniq_key:
                    key_hashes += (key_hash(topic, message.uniq_key),)
                tag = unit_tag_hash(topic, message.tags, message.properties)
                hints.append((tag, key_hashes))
        return records, entries

    def append(
        self,
        block: bytearray,
        entries: list[BlockEntry],
        hints: list[DispatchHint],
        stamp_store_host: bool,
    ) -> list[PutResult]:
        """Stamp queue offsets, physical offsets, the store time and the CRC trailers into
        ``block`` and write it (under the write lock), one CommitLog append per segment-sized
        chunk. Queue offsets are committed only once their bytes are written; then the
        dispatcher is told what it needs of each written record (``Dispatcher.expect``)."""
        segment_size = self._commit_log.segment_size_bytes
        results: list[PutResult] = []
        store_timestamp_ms = self._now_ms()
        chunk_start = chunk_first_byte = 0
        while chunk_start < len(entries):
            chunk_end = chunk_start
            chunk_bytes = 0
            while chunk_end < len(entries) and chunk_bytes + entries[chunk_end][1] <= segment_size:
                chunk_bytes += entries[chunk_end][1]
                chunk_end += 1
            start = self._commit_log.position_for(chunk_bytes)
            chunk_entries = entries[chunk_start:chunk_end]
            chunk_results, assigned = self.stamp(
                block, chunk_entries, chunk_first_byte, start, store_timestamp_ms, stamp_store_host
            )
            log_end_before = self._commit_log.max_offset
            with memoryview(block) as view:
                written = self._commit_log.append(
                    view[chunk_first_byte : chunk_first_byte + chunk_bytes]
                )
            assert written == start, f"append wrote at {written}, expected {start}"
            # Only offsets whose bytes reached the CommitLog count as used.
            self._next_queue_offsets.update(assigned)
            self._dispatcher.expect(
                log_end_before,
                [
                    (
                        result.physical_offset,
                        size,
                        queue_key,
                        result.queue_offset,
                        tag,
                        key_hashes,
                        store_timestamp_ms,
                    )
                    for result, (queue_key, size), (tag, key_hashes) in zip(
                        chunk_results, chunk_entries, hints[chunk_start:chunk_end], strict=True
                    )
                ],
            )
            results += chunk_results
            chunk_start, chunk_first_byte = chunk_end, chunk_first_byte + chunk_bytes
        return results

    def stamp(
        self,
        block: bytearray,
        entries: Sequence[BlockEntry],
        first_byte: int,
        first_physical_offset: int,
        store_timestamp_ms: int,
        stamp_store_host: bool,
    ) -> tuple[list[PutResult], dict[tuple[str, int], int]]:
        """Stamp ``entries`` (the records from byte ``first_byte`` of ``block``) for a place
        starting at ``first_physical_offset``; returns the results and the next queue offset
        of each queue stamped (for the caller to commit)."""
        store_host = self._packed_store_host if stamp_store_host else None
        assigned: dict[tuple[str, int], int] = {}
        results: list[PutResult] = []
        message_id_of = self._message_id_of
        position = first_byte
        for queue_key, size in entries:
            queue_offset = assigned.get(queue_key)
            if queue_offset is None:
                queue_offset = self.next_queue_offset(queue_key)
            physical_offset = first_physical_offset + position - first_byte
            patch_record(
                block,
                position,
                queue_offset=queue_offset,
                physical_offset=physical_offset,
                store_timestamp_ms=store_timestamp_ms,
                store_host=store_host,
            )
            results.append(PutResult(queue_offset, physical_offset, message_id_of(physical_offset)))
            assigned[queue_key] = queue_offset + 1
            position += size
        return results, assigned

    def next_queue_offset(self, queue_key: tuple[str, int]) -> int:
        next_queue_offset = self._next_queue_offsets.get(queue_key)
        if next_queue_offset is None:
            next_queue_offset = self._consume_queue(*queue_key).max_queue_offset
        return next_queue_offset

    def reload_next_queue_offsets(self, from_physical_offset: int) -> None:
        """Forget assigned queue offsets and re-learn those the tail from
        ``from_physical_offset`` holds (the rest come from the ConsumeQueues on first use).
        The caller holds the write lock (or is opening)."""
        self._next_queue_offsets.clear()
        for _, view in self._commit_log.scan(from_physical_offset, self._commit_log.max_offset):
            info = read_dispatch_info(view, 0)
            self._next_queue_offsets[(info.topic, info.queue_id)] = info.queue_offset + 1
