"""MessageStore: the single-node storage engine behind one facade.

``MessageStore.open`` takes the directory lock (a second process is refused), notes whether the
last stop was clean (abort marker), recovers the CommitLog (a torn tail is truncated), cuts
ConsumeQueue units and index entries that dispatch will redo, re-dispatches, and restores each
queue's next queue offset. Then it takes writes (``put_messages``, or ``put_encoded`` for
records the producer or the Raft leader already encoded) and answers reads by queue offset,
key, time and message id.

Rules this module keeps:
- Validation first: a refused batch leaves no byte behind (CommitLog max_offset unchanged),
  and a batch is all or nothing on the validation path. ``put_encoded`` also verifies every
  record's structure, body CRC and ``__CRC32#`` trailer first (CorruptRecordError).
- One writer at a time (``_write_lock``): queue offsets are assigned densely per topic/queue,
  the batch is encoded outside the lock, stamped in place inside it, and written with one
  CommitLog append per segment-sized chunk (normally one per batch).
- SYNC_FLUSH acknowledges only after an fsync covered the batch (group commit, flusher.py:
  concurrent writers share fsyncs). ASYNC_FLUSH acknowledges after the write; a periodic
  flusher fsyncs.
- The write path hands the dispatcher each written record's place, queue offset, tag hash
  and key hashes (``Dispatcher.expect``), so the dispatch that runs before the write returns
  need not read and parse the records again. A producer-encoded record may name TAGS, KEYS
  and UNIQ_KEY once each (dispatch and readers must agree on the value).
- Readers only see dispatched records. Dispatch is capped by ``dispatch_bound`` when given
  (the Raft node passes its commit index), else it follows the writes: under SYNC_FLUSH up to
  what is durable, under ASYNC_FLUSH up to what is written.
- Recovery treats ConsumeQueues and IndexFiles as derived data. After an unclean stop every
  unit and entry at or past the checkpoint's dispatched offset is dropped and re-dispatched
  from the CommitLog. The checkpoint is written only after the ConsumeQueues and the index are
  durable up to the dispatched offset it records, so nothing below it needs redoing: it
  writes the ConsumeQueues' buffered units (write-behind, consume_queue.py) and fsyncs their
  files before it saves that offset.
- Writes are refused above the disk-full watermark and resume, with no latch, once retention
  has freed space.
- A housekeeping thread (``housekeeping_interval_ms``) checkpoints and runs retention, so a
  crash redoes a bounded amount of dispatch; tests turn it off and call both by hand.
- A SYNC_FLUSH write not durable within ``sync_flush_timeout_s`` raises TimeoutError: it was
  written but not acknowledged (RocketMQ's FLUSH_DISK_TIMEOUT). The writer that runs the
  group's fsync itself returns when the fsync does (flusher.py).
- Every argument is checked before use: a wrong type or a value a field cannot hold raises
  the ``StoreError`` for it (validation.py), never a TypeError or struct.error. Reads racing a
  retention pass retry past what it deleted instead of failing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from raftlog.store.checkpoint import (
    Checkpoint,
    load_checkpoint,
    recovery_start_offset,
    save_checkpoint,
)
from raftlog.store.commit_log import CommitLog, Envelope
from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.consume_queue import (
    ConsumeQueue,
    ConsumeQueueUnit,
    FileHandleCache,
    WriteBehind,
    list_queues,
)
from raftlog.store.consumer_offsets import ConsumerOffsets
from raftlog.store.dispatcher import Dispatcher
from raftlog.store.errors import (
    BodyTooLargeError,
    CorruptRecordError,
    DiskFullError,
    InvalidArgumentError,
    InvalidMessageIdError,
    InvalidOffsetError,
    InvalidQueueIdError,
    PropertiesTooLargeError,
    StoreClosedError,
)
from raftlog.store.filesystem import FileSystem, OsFileSystem
from raftlog.store.flusher import GroupCommitFlusher, PeriodicFlusher
from raftlog.store.hashing import key_hash, tag_hash
from raftlog.store.index_file import IndexService
from raftlog.store.message_id import decode_message_id, message_id_encoder
from raftlog.store.record import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    MessageRecord,
    encode_unstamped_record,
    pack_address,
    pack_host,
    patch_record,
    read_dispatch_info,
    read_store_timestamp_ms,
    split_keys,
    store_host_matches,
    verify_block,
)
from raftlog.store.retention import Retention, RetentionReport
from raftlog.store.store_lock import AbortMarker, StoreLock
from raftlog.store.topic_config import TopicConfig, TopicTable
from raftlog.store.validation import (
    Limits,
    check_message_fields,
    validate_body,
    validate_properties,
    validate_sizes,
    validate_topic,
)

DEFAULT_STORE_HOST = ("127.0.0.1", 10911)
DEFAULT_MAX_OPEN_QUEUE_FILES = 256
DEFAULT_SYNC_FLUSH_TIMEOUT_S = 5.0
DEFAULT_HOUSEKEEPING_INTERVAL_MS = 1000
# ConsumeQueue units buffered in memory (20 bytes each) before they are written out.
MAX_BUFFERED_CONSUME_QUEUE_UNITS = 200_000
COMMIT_LOG_DIR = "commitlog"
# A tag-filtered read inspects at most this many units before returning what it found.
_MAX_UNITS_SCANNED_PER_GET = 16384
_UNITS_READ_PER_CHUNK = 1024
_RESERVED_PROPERTY_KEYS = frozenset((PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY))
_ALL_TAGS = "*"


@dataclass(frozen=True, slots=True)
class Message:
    """One message to write. ``keys`` and ``uniq_key`` (the producer's unique id) are indexed
    for lookup by key; ``tags`` is filtered on by ``get_messages``."""

    topic: str
    queue_id: int
    body: bytes
    tags: str = ""
    keys: tuple[str, ...] = ()
    uniq_key: str = ""
    properties: tuple[tuple[str, str], ...] = ()
    flag: int = 0
    born_timestamp_ms: int | None = None
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


@dataclass(frozen=True, slots=True)
class PutResult:
    queue_offset: int
    physical_offset: int
    msg_id: str


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


# What one chunk of a queue read yields per chosen unit: a decoded record or its bytes.
_Item = TypeVar("_Item", MessageRecord, memoryview)
_Result = TypeVar("_Result")


def _record_tags(record: MessageRecord) -> str:
    return record.tags


def _record_bytes_tags(record: memoryview) -> str:
    return read_dispatch_info(record).tags


# One record of a block to append: its topic/queue and its size in bytes.
BlockEntry = tuple[tuple[str, int], int]
# What the write path knows for dispatch of one record: its tag hash and key hashes.
_DispatchHint = tuple[int, tuple[int, ...]]


class MessageStore:
    """Use ``MessageStore.open(config)``; close with ``close()`` (or as a context manager)."""

    def __init__(
        self,
        config: StoreConfig,
        fs: FileSystem,
        *,
        now_ms: Callable[[], int],
        store_host: tuple[str, int],
        dispatch_bound: Callable[[], int] | None,
        envelopes: Sequence[Envelope],
        max_open_queue_files: int,
        sync_flush_timeout_s: float,
        housekeeping_interval_ms: int | None,
    ) -> None:
        self._config = config
        self._fs = fs
        self._now_ms = now_ms
        self._store_host = store_host
        self._dispatch_bound = dispatch_bound
        self._sync_flush_timeout_s = sync_flush_timeout_s
        self._message_id_of = message_id_encoder(store_host)
        self._store_address = pack_address(store_host[0])
        self._packed_store_host = pack_host(store_host)
        self._write_lock = threading.Lock()
        self._dispatch_lock = threading.Lock()
        self._queues_lock = threading.Lock()
        self._closed = False
        root = config.root_dir
        fs.makedirs(root)
        self._store_lock = StoreLock(root)
        self._store_lock.acquire()
        try:
            self._abort_marker = AbortMarker(fs, root)
            unclean_stop = self._abort_marker.was_unclean_stop()
            self._abort_marker.create()
            checkpoint = load_checkpoint(fs, root)
            self._commit_log = CommitLog(
                fs,
                os.path.join(root, COMMIT_LOG_DIR),
                config.segment_size_bytes,
                config.max_open_segments,
                envelopes,
            )
            self._handles = FileHandleCache(fs, max_open_queue_files)
            self._write_behind = WriteBehind(MAX_BUFFERED_CONSUME_QUEUE_UNITS)
            self._queues: dict[tuple[str, int], ConsumeQueue] = {}
            self._next_queue_offsets: dict[tuple[str, int], int] = {}
            self._index = IndexService(
                fs, self._handles, root, config.index_slot_count, config.index_entry_count, now_ms
            )
            self._topics = TopicTable(fs, root, config.limits)
            self._consumer_offsets = ConsumerOffsets(fs, root)
            self._dispatcher = Dispatcher(
                self._commit_log,
                self._consume_queue,
                self._index,
                self._recover(checkpoint, unclean_stop),
            )
            self._retention = Retention(
                fs, config, self._commit_log, self._all_consume_queues, self._index, now_ms
            )
            self.dispatch()
            self._reload_next_queue_offsets()
            self._group_flusher: GroupCommitFlusher | None = None
            self._periodic_flusher: PeriodicFlusher | None = None
            if config.flush_mode is FlushMode.SYNC_FLUSH:
                self._group_flusher = GroupCommitFlusher(self._commit_log)
                self._group_flusher.start()
            else:
                self._periodic_flusher = PeriodicFlusher(self._commit_log, config.flush_interval_ms)
                self._periodic_flusher.start()
            self._housekeeper: _Housekeeper | None = None
            if housekeeping_interval_ms is not None:
                self._housekeeper = _Housekeeper(self._housekeep, housekeeping_interval_ms)
                self._housekeeper.start()
        except BaseException:
            self._store_lock.release()
            raise

    @classmethod
    def open(
        cls,
        config: StoreConfig,
        fs: FileSystem | None = None,
        *,
        now_ms: Callable[[], int] | None = None,
        store_host: tuple[str, int] = DEFAULT_STORE_HOST,
        dispatch_bound: Callable[[], int] | None = None,
        envelopes: Sequence[Envelope] = (),
        max_open_queue_files: int = DEFAULT_MAX_OPEN_QUEUE_FILES,
        sync_flush_timeout_s: float = DEFAULT_SYNC_FLUSH_TIMEOUT_S,
        housekeeping_interval_ms: int | None = DEFAULT_HOUSEKEEPING_INTERVAL_MS,
    ) -> MessageStore:
        """Open (and recover) the store under ``config.root_dir``. ``dispatch_bound`` caps what
        readers can see (the Raft commit point); ``now_ms`` is the store clock. Every
        ``housekeeping_interval_ms`` a background thread checkpoints (bounding the work a
        recovery redoes) and runs retention; None turns it off (call ``checkpoint`` and
        ``run_retention`` yourself)."""
        return cls(
            config,
            fs if fs is not None else OsFileSystem(),
            now_ms=now_ms if now_ms is not None else _wall_clock_ms,
            store_host=store_host,
            dispatch_bound=dispatch_bound,
            envelopes=envelopes,
            max_open_queue_files=max_open_queue_files,
            sync_flush_timeout_s=sync_flush_timeout_s,
            housekeeping_interval_ms=housekeeping_interval_ms,
        )

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ recovery

    def _recover(self, checkpoint: Checkpoint | None, unclean_stop: bool) -> int:
        """Recover the CommitLog and cut derived data back to the dispatched offset to redo
        from; returns that offset."""
        log = self._commit_log
        max_offset = log.recover(recovery_start_offset(checkpoint, log.min_offset))
        recorded = checkpoint.dispatched_physical_offset if checkpoint else 0
        dispatched = min(max(recorded, log.min_offset), max_offset)
        # After a clean stop the checkpoint's dispatched offset is exact and nothing was
        # derived past it, unless recovery cut the CommitLog below it.
        if unclean_stop or checkpoint is None or recorded > max_offset:
            for topic, queue_id in list_queues(self._fs, self._config.root_dir):
                self._consume_queue(topic, queue_id).truncate_from_physical_offset(dispatched)
            self._index.recover(dispatched)
        return dispatched

    def reload_next_queue_offsets(self) -> None:
        """Forget assigned queue offsets and re-learn those the undispatched tail holds (the
        rest come from the ConsumeQueues on first use). Call it after records reached the
        CommitLog other than through ``put_messages`` (a Raft follower that becomes leader
        wrote its leader's bytes), before the next ``put_messages``."""
        with self._write_lock:
            self._reload_next_queue_offsets()

    def _reload_next_queue_offsets(self) -> None:
        """``reload_next_queue_offsets`` for a caller holding the write lock (or opening)."""
        self._next_queue_offsets.clear()
        for _, view in self._commit_log.scan(
            self._dispatcher.dispatched_physical_offset, self._commit_log.max_offset
        ):
            info = read_dispatch_info(view, 0)
            self._next_queue_offsets[(info.topic, info.queue_id)] = info.queue_offset + 1

    # ------------------------------------------------------------------ topics, offsets

    def create_topic(self, topic: str, queue_count: int) -> TopicConfig:
        return self._topics.create_topic(topic, queue_count)

    def create_topics(self, topics: Sequence[tuple[str, int]]) -> list[TopicConfig]:
        """Create (or grow) many ``(topic, queue_count)`` at once, with one durable write."""
        return self._topics.create_topics(topics)

    def list_topics(self) -> list[TopicConfig]:
        return self._topics.list_topics()

    def describe_topic(self, topic: str) -> TopicConfig:
        return self._topics.describe(topic)

    def commit_consumer_offset(
        self, group: str, topic: str, queue_id: int, queue_offset: int
    ) -> None:
        """Durably record ``queue_offset`` as the next one ``group`` consumes."""
        self._check_queue(topic, queue_id)
        self._consumer_offsets.commit(group, topic, queue_id, queue_offset)
        self._consumer_offsets.persist()

    def fetch_consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._consumer_offsets.fetch(group, topic, queue_id)

    # ------------------------------------------------------------------ writes

    def put_message(self, message: Message) -> PutResult:
        return self.put_messages([message])[0]

    def put_messages(self, messages: Sequence[Message]) -> list[PutResult]:
        """Validate, write and (under SYNC_FLUSH) fsync a batch; returns one result per
        message, in order."""
        self.check_writable()
        hints: list[_DispatchHint] = []
        records, entries = self._encode(messages, hints)
        return self._write(bytearray().join(records), entries, hints)

    def put_encoded(self, block: bytes | bytearray) -> list[PutResult]:
        """Write records the producer (or the Raft leader) encoded: ``block`` holds them back
        to back, each with its ``__CRC32#`` trailer. Every record's structure and CRCs are
        verified (CorruptRecordError) and its topic, queue and sizes validated before
        anything is written, so a refused block leaves nothing behind. Queue offset, physical
        offset, store time and the trailer are then stamped in place; born host, born time,
        store host and the rest are kept as encoded."""
        self.check_writable()
        validate_body(block, "a block of encoded records")
        hints: list[_DispatchHint] = []
        entries = self._check_encoded(block, hints)
        return self._write(bytearray(block), entries, hints, stamp_store_host=True)

    def encode_messages(self, messages: Sequence[Message]) -> tuple[bytearray, list[BlockEntry]]:
        """Validate and encode a batch without writing it: the unstamped block and one
        ``((topic, queue_id), size_bytes)`` per record. A replicated writer (the Raft leader)
        stamps it with ``stamp_block`` once it knows where the block will lie."""
        records, entries = self._encode(messages)
        return bytearray().join(records), entries

    def check_encoded(self, block: bytes | bytearray) -> list[BlockEntry]:
        """Verify and validate a producer-encoded block (see ``put_encoded``) without writing
        it; one ``((topic, queue_id), size_bytes)`` per record."""
        return self._check_encoded(block, None)

    def _check_encoded(
        self, block: bytes | bytearray, hints: list[_DispatchHint] | None
    ) -> list[BlockEntry]:
        """``check_encoded``, also filling ``hints`` (when given) with each record's."""
        limits = self._config.limits
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
            reserved = [name for name, _ in record.properties if name in _RESERVED_PROPERTY_KEYS]
            if len(reserved) != len(set(reserved)):
                # Dispatch would index one value and readers re-check another.
                raise PropertiesTooLargeError(
                    f"record {index}: properties {sorted(reserved)} name TAGS, KEYS or UNIQ_KEY "
                    "more than once"
                )
            entries.append(((topic, record.queue_id), record.size))
            if hints is not None:
                hints.append(_hint_of_properties(topic, record.properties))
        return entries

    def stamp_block(
        self,
        block: bytearray,
        entries: Sequence[BlockEntry],
        first_physical_offset: int,
        store_timestamp_ms: int,
        *,
        stamp_store_host: bool = False,
    ) -> list[PutResult]:
        """Stamp the next queue offsets, the physical offsets (the block's first record at
        ``first_physical_offset``), the store time and the CRC trailers into ``block``
        without writing it: the Raft leader's half of a write, whose bytes reach the CommitLog
        inside a Raft entry. ``stamp_store_host``: also this store's host (a producer-encoded
        block, ``check_encoded``). The assigned queue offsets count as used from now on (the
        next stamp continues after them) until ``reload_next_queue_offsets``."""
        with self._write_lock:
            results, assigned = self._stamp(
                block, entries, 0, first_physical_offset, store_timestamp_ms, stamp_store_host
            )
            self._next_queue_offsets.update(assigned)
            return results

    def check_writable(self) -> None:
        """StoreClosedError, or DiskFullError above the full watermark (a replicated writer
        checks it before proposing, since its bytes reach the CommitLog another way)."""
        if self._closed:
            raise StoreClosedError("the store is closed")
        if self._retention.is_disk_full():
            raise DiskFullError(
                f"disk use {self._retention.disk_usage_ratio():.0%} is above the full watermark "
                f"{self._config.disk_full_ratio:.0%}; writes resume once retention frees space"
            )

    def _write(
        self,
        block: bytearray,
        entries: list[BlockEntry],
        hints: list[_DispatchHint],
        *,
        stamp_store_host: bool = False,
    ) -> list[PutResult]:
        """Append validated, unstamped records (``hints``: one per record, handed to the
        dispatcher with their places), wait for durability (SYNC_FLUSH) and dispatch."""
        if not entries:
            return []
        segment_size = self._commit_log.segment_size_bytes
        for _, size in entries:
            if size > segment_size:
                raise BodyTooLargeError(
                    f"the record is {size} bytes; a {segment_size}-byte segment cannot hold it"
                )
        with self._write_lock:
            if self._closed:
                raise StoreClosedError("the store is closed")
            results = self._append(block, entries, hints, stamp_store_host)
        end = results[-1].physical_offset + entries[-1][1]
        if self._group_flusher is not None:
            self._group_flusher.wait_flushed(end, self._sync_flush_timeout_s)
            self.dispatch(self._commit_log.flushed_offset)
        else:
            self.dispatch()
        return results

    def _encode(
        self, messages: Sequence[Message], hints: list[_DispatchHint] | None = None
    ) -> tuple[list[bytes], list[BlockEntry]]:
        """Validate and encode a batch, unstamped (``encode_unstamped_record``); topics are
        checked once per batch. ``hints``, when given, gets each record's dispatch hint."""
        limits = self._config.limits
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
            properties_bytes = _encode_message_properties(message)
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
                hints.append((tag_hash(message.tags), key_hashes))
        return records, entries

    def _append(
        self,
        block: bytearray,
        entries: list[BlockEntry],
        hints: list[_DispatchHint],
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
            chunk_results, assigned = self._stamp(
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

    def _stamp(
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
                queue_offset = self._next_queue_offset(queue_key)
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

    def _next_queue_offset(self, queue_key: tuple[str, int]) -> int:
        next_queue_offset = self._next_queue_offsets.get(queue_key)
        if next_queue_offset is None:
            next_queue_offset = self._consume_queue(*queue_key).max_queue_offset
        return next_queue_offset

    def truncate_after(self, physical_offset: int) -> None:
        """Drop every record at or past ``physical_offset`` (a record boundary): a Raft
        truncation of a conflicting suffix. Derived data past it goes too."""
        with self._write_lock, self._dispatch_lock:
            self._commit_log.truncate_after(physical_offset)
            self._dispatcher.forget_expected()
            if physical_offset < self._dispatcher.dispatched_physical_offset:
                for queue in self._all_consume_queues():
                    queue.truncate_from_physical_offset(physical_offset)
                self._index.truncate_from(physical_offset)
                self._dispatcher.reset(physical_offset)
            self._reload_next_queue_offsets()

    # ------------------------------------------------------------------ dispatch

    def dispatch(self, up_to_physical_offset: int | None = None) -> int:
        """Make records visible up to ``up_to_physical_offset`` (default: everything written),
        never past ``dispatch_bound``; returns how many records became visible."""
        with self._dispatch_lock:
            bound = (
                self._commit_log.max_offset
                if up_to_physical_offset is None
                else up_to_physical_offset
            )
            if self._dispatch_bound is not None:
                bound = min(bound, self._dispatch_bound())
            return self._dispatcher.dispatch(bound)

    @property
    def dispatched_physical_offset(self) -> int:
        return self._dispatcher.dispatched_physical_offset

    @property
    def commit_log(self) -> CommitLog:
        return self._commit_log

    @property
    def limits(self) -> Limits:
        """The validation limits this store enforces."""
        return self._config.limits

    # ------------------------------------------------------------------ reads

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_messages: int = 32,
        max_bytes: int = 4 * 1024 * 1024,
        tag: str | frozenset[str] | None = None,
        max_units_scanned: int = _MAX_UNITS_SCANNED_PER_GET,
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
        max_units_scanned: int = _MAX_UNITS_SCANNED_PER_GET,
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
        queue = self._check_queue(topic, queue_id)
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
        queue = self._check_queue(topic, queue_id)
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
        return self._first_live_queue_offset(self._check_queue(topic, queue_id))

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset to become visible."""
        return self._check_queue(topic, queue_id).max_queue_offset

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

    def _check_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue_count = self._topics.describe(topic).queue_count
        if not 0 <= queue_id < queue_count:
            raise InvalidQueueIdError(
                f"queue id {queue_id} is outside [0, {queue_count}) for topic {topic!r}"
            )
        return self._consume_queue(topic, queue_id)

    def _consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue_key = (topic, queue_id)
        queue = self._queues.get(queue_key)
        if queue is None:
            with self._queues_lock:
                queue = self._queues.get(queue_key)
                if queue is None:
                    queue = self._queues[queue_key] = ConsumeQueue(
                        self._fs,
                        self._handles,
                        self._config.root_dir,
                        topic,
                        queue_id,
                        self._config.consume_queue_file_units,
                        self._write_behind,
                    )
        return queue

    def _all_consume_queues(self) -> list[ConsumeQueue]:
        """Every queue with units: on disk, or so far only buffered (no directory yet)."""
        on_disk = list_queues(self._fs, self._config.root_dir)
        with self._queues_lock:
            in_memory = list(self._queues)
        return [
            self._consume_queue(topic, queue_id)
            for topic, queue_id in sorted(set(on_disk).union(in_memory))
        ]

    # ------------------------------------------------------------------ durability, retention

    def flush(self) -> int:
        """Fsync the CommitLog; returns the flushed physical offset."""
        return self._commit_log.flush()

    def checkpoint(self) -> Checkpoint:
        """Make ConsumeQueues, the index and the CommitLog durable, then record how far: a
        restart redoes dispatch only past this point."""
        with self._dispatch_lock:
            dispatched = self._dispatcher.dispatched_physical_offset
            buffered = self._write_behind.take()
        # Every unit below ``dispatched`` is written or buffered in ``buffered``; writing those
        # outside the lock lets dispatch go on meanwhile. Then each such unit's file is in
        # ``dirty`` or already durable.
        for queue in buffered:
            queue.write_buffered()
        dirty = self._handles.take_dirty()
        self._handles.sync_files(dirty)
        # The index header flushed now counts at least every entry below ``dispatched``.
        self._index.flush()
        flushed = self._commit_log.flush()
        now_ms = self._now_ms()
        checkpoint = Checkpoint(
            flushed_physical_offset=flushed,
            dispatched_physical_offset=dispatched,
            flushed_timestamp_ms=now_ms,
            index_timestamp_ms=now_ms,
        )
        save_checkpoint(self._fs, self._config.root_dir, checkpoint)
        return checkpoint

    def run_retention(self, max_deleted_end_offset: int | None = None) -> RetentionReport:
        """One retention pass (the owner schedules it, RocketMQ-style every few seconds). A
        Raft node bounds it by ``max_deleted_end_offset``, the end of its compacted log."""
        with self._write_lock, self._dispatch_lock:
            # Retention deletes whole ConsumeQueue files: buffered units must be in them.
            self._write_behind.write_all()
            return self._retention.run(max_deleted_end_offset)

    def retention_deletable_end_offset(self) -> int:
        """Where the segments retention would delete now end (see Retention)."""
        return self._retention.deletable_end_offset()

    def install_commit_log(self, source_dir: str, end_offset: int) -> None:
        """Replace the CommitLog by the segment files in ``source_dir`` ending at
        ``end_offset`` (a Raft follower installing the leader's segments), then drop every
        ConsumeQueue unit and index entry: dispatch re-derives them from the new log, up to
        the dispatch bound."""
        with self._write_lock, self._dispatch_lock:
            self._write_behind.write_all()
            self._commit_log.replace_segments(source_dir, end_offset)
            for queue in self._all_consume_queues():
                queue.clear()
            self._index.truncate_from(0)
            self._dispatcher.reset(self._commit_log.min_offset)
            self._next_queue_offsets.clear()

    def _housekeep(self) -> None:
        self.checkpoint()
        self.run_retention()

    def is_disk_full(self) -> bool:
        return self._retention.is_disk_full()

    def close(self) -> None:
        """Flush, checkpoint, and release the directory; the next open is a clean start."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
        try:
            if self._housekeeper is not None:
                self._housekeeper.stop()
            if self._group_flusher is not None:
                self._group_flusher.stop()
            if self._periodic_flusher is not None:
                self._periodic_flusher.stop()
            self.checkpoint()
            self._consumer_offsets.persist()
            self._handles.close_all()
            self._commit_log.close()
            self._abort_marker.remove()
        finally:
            self._store_lock.release()


class _Housekeeper:
    """A daemon thread calling ``task`` every ``interval_ms`` until stopped. A failing task
    stops it: the failure (a sticky flush error, say) also surfaces on the next write."""

    def __init__(self, task: Callable[[], None], interval_ms: int) -> None:
        assert interval_ms > 0
        self._task = task
        self._interval_s = interval_ms / 1000
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-housekeeper", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            try:
                self._task()
            except Exception as error:  # kept for the owner: see the docstring
                self.error = error
                return


def _encode_message_properties(message: Message) -> bytes:
    """The record's properties, as ``encode_properties`` lays them out: KEYS, TAGS and
    UNIQ_KEY from their fields (when set), then the user's. Refuses what validation refuses."""
    if isinstance(message.keys, str):
        # A str is a sequence of one-character keys: never what the caller meant.
        raise InvalidArgumentError(
            f"keys must be a tuple of str, got the str {message.keys[:40]!r}; pass "
            "(key,) for one key"
        )
    for key in message.keys:
        if not isinstance(key, str):
            raise InvalidArgumentError(f"keys must be str, got {type(key).__name__} {key!r}")
        if not key or KEY_SEPARATOR in key:
            raise PropertiesTooLargeError(
                f"key {key[:40]!r} is empty or holds the KEYS separator {KEY_SEPARATOR!r}"
            )
    for name, value in (("tags", message.tags), ("uniq_key", message.uniq_key)):
        if not isinstance(value, str):
            raise InvalidArgumentError(
                f"{name} must be a str, got {type(value).__name__} {value!r}"
            )
    pairs = [
        (name, value)
        for name, value in (
            (PROPERTY_KEYS, KEY_SEPARATOR.join(message.keys)),
            (PROPERTY_TAGS, message.tags),
            (PROPERTY_UNIQ_KEY, message.uniq_key),
        )
        if value
    ]
    if not all(isinstance(pair, tuple) and len(pair) == 2 for pair in message.properties):
        raise InvalidArgumentError(
            f"properties must be (key, value) pairs, got {message.properties!r:.80}"
        )
    for name, _ in message.properties:
        if name in _RESERVED_PROPERTY_KEYS:
            raise PropertiesTooLargeError(
                f"property {name!r} is set through Message.keys, .tags or .uniq_key"
            )
    pairs += message.properties
    text = "".join([f"{name}\x01{value}\x02" for name, value in pairs])
    # A separator inside a key or value shows as one too many; the reserved CRC key needs
    # the full check too (both are rare, so the common case counts two characters).
    if (
        text.count(NAME_VALUE_SEPARATOR) != len(pairs)
        or text.count(PROPERTY_SEPARATOR) != len(pairs)
        or message.properties
    ):
        validate_properties(pairs)
    try:
        return text.encode()
    except UnicodeEncodeError as error:
        raise InvalidArgumentError(
            f"properties, keys or tags hold text UTF-8 cannot encode: {error}"
        ) from error


def _hint_of_properties(topic: str, properties: Sequence[tuple[str, str]]) -> _DispatchHint:
    """The dispatch hint of a record with these (decoded) properties, as dispatch reading the
    record would find it (``read_dispatch_info``; each of TAGS, KEYS and UNIQ_KEY appears at
    most once, ``check_encoded``)."""
    found = {name: value for name, value in properties if name in _RESERVED_PROPERTY_KEYS}
    key_hashes = tuple([key_hash(topic, key) for key in split_keys(found.get(PROPERTY_KEYS, ""))])
    uniq_key = found.get(PROPERTY_UNIQ_KEY, "")
    if uniq_key:
        key_hashes += (key_hash(topic, uniq_key),)
    return tag_hash(found.get(PROPERTY_TAGS, "")), key_hashes


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000
