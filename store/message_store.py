"""MessageStore: the single-node storage engine behind one facade. The writes are
message_writer.py's (encode, check, stamp, append), the reads message_reader.py's (pulls,
lookups by key, time and message id); the facade owns the files, the locks, recovery,
dispatch, durability and retention, and hands each call to the half it belongs to.

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
  has freed space. A write the device itself refuses (ENOSPC part way) is refused the same
  way (DiskFullError) with nothing of it kept (commit_log.py), and uses no queue offset.
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
from collections.abc import Callable, Sequence

from raftlog.store.access_rules import AccessRules
from raftlog.store.checkpoint import (
    Checkpoint,
    load_checkpoint,
    recovery_start_offset,
)
from raftlog.store.checkpointer import Checkpointer
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
from raftlog.store.control_state import ControlState
from raftlog.store.dispatcher import Dispatcher
from raftlog.store.errors import (
    BodyTooLargeError,
    DiskFullError,
    InvalidOffsetError,
    StoreClosedError,
)
from raftlog.store.filesystem import FileSystem, OsFileSystem
from raftlog.store.flusher import GroupCommitFlusher, PeriodicFlusher
from raftlog.store.index_file import IndexService
from raftlog.store.message import BlockEntry, DispatchHint, Message, PutResult
from raftlog.store.message_reader import (
    MAX_UNITS_SCANNED_PER_GET,
    GetResult,
    MessageReader,
    RecordBytes,
)
from raftlog.store.message_writer import MessageWriter
from raftlog.store.record import (
    MessageRecord,
    RecordShape,
    walk_block,
)
from raftlog.store.retention import Retention, RetentionReport
from raftlog.store.store_lock import AbortMarker, StoreLock
from raftlog.store.topic_config import TopicConfig, TopicTable
from raftlog.store.validation import (
    Limits,
    validate_body,
)

DEFAULT_STORE_HOST = ("127.0.0.1", 10911)
DEFAULT_MAX_OPEN_QUEUE_FILES = 256
DEFAULT_SYNC_FLUSH_TIMEOUT_S = 5.0
DEFAULT_HOUSEKEEPING_INTERVAL_MS = 1000
# ConsumeQueue units buffered in memory (20 bytes each) before they are written out.
MAX_BUFFERED_CONSUME_QUEUE_UNITS = 200_000
COMMIT_LOG_DIR = "commitlog"


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
        self._dispatch_bound = dispatch_bound
        self._sync_flush_timeout_s = sync_flush_timeout_s
        self._write_lock = threading.Lock()
        # A master-slave master's hook, called after each write reaches the CommitLog and
        # before the flush wait: its slaves' streams send (and the slaves fsync) while the
        # master fsyncs, rather than after.
        self.on_append: Callable[[], None] | None = None
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
            self._index = IndexService(
                fs, self._handles, root, config.index_slot_count, config.index_entry_count, now_ms
            )
            self._topics = TopicTable(fs, root, config.limits)
            self._writer, self._reader = self._halves(config, store_host, now_ms)
            self._consumer_offsets = ConsumerOffsets(fs, root)
            self.access_rules = AccessRules(fs, root)
            recovered = self._recover(checkpoint, unclean_stop)
            self._checkpointer = self._open_checkpointer(checkpoint, recovered, now_ms)
            self._dispatcher = Dispatcher(
                self._commit_log, self._consume_queue, self._index, recovered
            )
            self._retention = Retention(
                fs, config, self._commit_log, self._all_consume_queues, self._index, now_ms
            )
            self.dispatch()
            self._writer.reload_next_queue_offsets(self._dispatcher.dispatched_physical_offset)
            self._start_background(housekeeping_interval_ms)
        except BaseException:
            self._store_lock.release()
            raise

    def _halves(
        self, config: StoreConfig, store_host: tuple[str, int], now_ms: Callable[[], int]
    ) -> tuple[MessageWriter, MessageReader]:
        """The write and read halves, over this store's CommitLog, topics and queues."""
        writer = MessageWriter(
            limits=config.limits,
            topics=self._topics,
            commit_log=self._commit_log,
            dispatcher=lambda: self._dispatcher,
            consume_queue=self._consume_queue,
            store_host=store_host,
            now_ms=now_ms,
        )
        reader = MessageReader(
            topics=self._topics,
            commit_log=self._commit_log,
            index=self._index,
            dispatcher=lambda: self._dispatcher,
            consume_queue=self._consume_queue,
            now_ms=now_ms,
        )
        return writer, reader

    def _start_background(self, housekeeping_interval_ms: int | None) -> None:
        """The flusher of the configured flush mode, and the housekeeper when asked for."""
        self._group_flusher: GroupCommitFlusher | None = None
        self._periodic_flusher: PeriodicFlusher | None = None
        if self._config.flush_mode is FlushMode.SYNC_FLUSH:
            self._group_flusher = GroupCommitFlusher(self._commit_log)
            self._group_flusher.start()
        else:
            self._periodic_flusher = PeriodicFlusher(
                self._commit_log, self._config.flush_interval_ms
            )
            self._periodic_flusher.start()
        self._housekeeper: _Housekeeper | None = None
        if housekeeping_interval_ms is not None:
            self._housekeeper = _Housekeeper(self._housekeep, housekeeping_interval_ms)
            self._housekeeper.start()

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

    def _open_checkpointer(
        self, checkpoint: Checkpoint | None, recovered: int, now_ms: Callable[[], int]
    ) -> Checkpointer:
        """The checkpointer, its record lowered to what recovery left: recovery may have cut
        below what the file vouches for, and new writes would land there (checkpointer.py)."""
        config = self._config
        checkpointer = Checkpointer(
            self._fs, config.root_dir, checkpoint, config.consume_queue_flush_interval_ms, now_ms
        )
        checkpointer.lower(self._commit_log.max_offset, recovered)
        return checkpointer

    def reload_next_queue_offsets(self) -> None:
        """Forget assigned queue offsets and re-learn those the undispatched tail holds (the
        rest come from the ConsumeQueues on first use). Call it after records reached the
        CommitLog other than through ``put_messages`` (a Raft follower that becomes leader
        wrote its leader's bytes), before the next ``put_messages``."""
        with self._write_lock:
            self._writer.reload_next_queue_offsets(self._dispatcher.dispatched_physical_offset)

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
        self._reader.check_queue(topic, queue_id)
        self._consumer_offsets.commit(group, topic, queue_id, queue_offset)
        self._consumer_offsets.persist()

    def fetch_consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._consumer_offsets.fetch(group, topic, queue_id)

    def consumer_offsets(self) -> dict[tuple[str, str, int], int]:
        """Every committed offset: ``{(group, topic, queue_id): next queue offset}``."""
        table = self._consumer_offsets
        return {
            (group, topic, queue_id): offset
            for group in table.groups()
            for (topic, queue_id), offset in table.offsets_of_group(group).items()
        }

    def control_state(self) -> ControlState:
        """A copy of the replicated tables: topics, consumer offsets, access rules (a Raft
        leader sends it with a snapshot; call it where those tables change, so the three agree
        with one point of the log)."""
        return ControlState(
            {config.name: config.queue_count for config in self._topics.list_topics()},
            self.consumer_offsets(),
            dict(self.access_rules.snapshot()[1]),
        )

    def replace_control_state(self, state: ControlState) -> None:
        """Replace the topics, consumer offsets and access rules by ``state`` wholesale (a Raft
        follower installing a snapshot), each table durably (topics first, so no offset names
        a queue the table lacks). Every value is checked before any table changes: the store's
        error for one it refuses, and nothing replaced."""
        self._topics.check_all(state.topics)
        self._consumer_offsets.check_all(state.consumer_offsets)
        self._topics.replace_all(state.topics)
        self._consumer_offsets.replace_all(state.consumer_offsets)
        self.access_rules.replace_all(state.access_rules)

    # ------------------------------------------------------------------ writes

    def put_message(self, message: Message) -> PutResult:
        return self.put_messages([message])[0]

    def put_messages(self, messages: Sequence[Message]) -> list[PutResult]:
        """Validate, write and (under SYNC_FLUSH) fsync a batch; returns one result per
        message, in order."""
        self.check_writable()
        hints: list[DispatchHint] = []
        records, entries = self._writer.encode(messages, hints)
        return self._write(bytearray().join(records), entries, hints)

    def put_encoded(
        self, block: bytes | bytearray, trailing: Sequence[Message] = ()
    ) -> list[PutResult]:
        """Write records the producer (or the Raft leader) encoded: ``block`` holds them back
        to back, each with its ``__CRC32#`` trailer. Every record's structure and CRCs are
        verified (CorruptRecordError) and its topic, queue and sizes validated before
        anything is written, so a refused block leaves nothing behind. Queue offset, physical
        offset, store time and the trailer are then stamped in place; born host, born time,
        store host and the rest are kept as encoded. ``trailing`` messages (a master's
        idempotence marker) are encoded here and written right after, in the same append."""
        self.check_writable()
        validate_body(block, "a block of encoded records")
        hints: list[DispatchHint] = []
        entries = self._writer.check_encoded(block, hints)
        whole = bytearray(block)
        if trailing:
            records, trailing_entries = self._writer.encode(trailing, hints)
            whole += b"".join(records)
            entries += trailing_entries
        return self._write(whole, entries, hints, stamp_store_host=True)

    def encode_messages(self, messages: Sequence[Message]) -> tuple[bytearray, list[BlockEntry]]:
        """Validate and encode a batch without writing it: the unstamped block and one
        ``((topic, queue_id), size_bytes)`` per record. A replicated writer (the Raft leader)
        stamps it with ``stamp_block`` once it knows where the block will lie."""
        records, entries = self._writer.encode(messages)
        return bytearray().join(records), entries

    def check_encoded(self, block: bytes | bytearray) -> list[BlockEntry]:
        """Verify and validate a producer-encoded block (see ``put_encoded``) without writing
        it; one ``((topic, queue_id), size_bytes)`` per record."""
        return self._writer.check_encoded(block, None)

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
            results, assigned = self._writer.stamp(
                block, entries, 0, first_physical_offset, store_timestamp_ms, stamp_store_host
            )
            self._writer.commit_queue_offsets(assigned)
            return results

    def check_writable(self) -> None:
        """StoreClosedError, or DiskFullError above the full watermark (a replicated writer
        checks it before proposing, since its bytes reach the CommitLog another way)."""
        if self._closed:
            raise StoreClosedError("the store is closed")
        if self._retention.is_disk_full():
            raise DiskFullError(
                f"disk use {self._retention.disk_usage_ratio():.1%} is above the full watermark "
                f"{self._config.disk_full_ratio:.1%} (disk_full_ratio); nothing was written, "
                "and writes resume once retention or the operator frees space"
            )

    def _write(
        self,
        block: bytearray,
        entries: list[BlockEntry],
        hints: list[DispatchHint],
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
            results = self._writer.append(block, entries, hints, stamp_store_host)
        if self.on_append is not None:
            self.on_append()
        end = results[-1].physical_offset + entries[-1][1]
        if self._group_flusher is not None:
            self._group_flusher.wait_flushed(end, self._sync_flush_timeout_s)
            self.dispatch(self._commit_log.flushed_offset)
        else:
            self.dispatch()
        return results

    def append_replicated(self, physical_offset: int, block: bytes) -> list[RecordShape]:
        """Store records a master streamed (a master-slave slave's write): ``block`` must be
        whole, well-formed records (CorruptRecordError otherwise; their CRCs are the chunk
        checksum's business, checked by the caller) and land exactly at ``physical_offset``
        (InvalidOffsetError otherwise: the logs diverged), so the replica stays
        byte-identical. Fsynced under SYNC_FLUSH; not dispatched (the caller applies control
        records first, then calls ``dispatch``). Returns each record's size and topic."""
        records = walk_block(block)
        with self._write_lock:
            if self._closed:
                raise StoreClosedError("the store is closed")
            position = self._commit_log.position_for(len(block))
            if position != physical_offset:
                raise InvalidOffsetError(
                    f"replicated bytes for offset {physical_offset} would land at {position} "
                    f"(this log ends at {self._commit_log.max_offset}): the logs diverged"
                )
            self._commit_log.append(block)
        if self._group_flusher is not None:
            self._group_flusher.wait_flushed(
                physical_offset + len(block), self._sync_flush_timeout_s
            )
        return records

    def truncate_after(self, physical_offset: int) -> None:
        """Drop every record at or past ``physical_offset`` (a record boundary): a Raft
        truncation of a conflicting suffix. Derived data past it goes too."""
        with self._checkpointer.lock, self._write_lock, self._dispatch_lock:
            self._checkpointer.lower(physical_offset, physical_offset)
            self._commit_log.truncate_after(physical_offset)
            self._dispatcher.forget_expected()
            if physical_offset < self._dispatcher.dispatched_physical_offset:
                for queue in self._all_consume_queues():
                    queue.truncate_from_physical_offset(physical_offset)
                self._index.truncate_from(physical_offset)
                self._dispatcher.reset(physical_offset)
            self._writer.reload_next_queue_offsets(self._dispatcher.dispatched_physical_offset)

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

    # ------------------------------------------------------------------ reads (message_reader.py)

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
        """Up to ``max_messages`` decoded messages from ``queue_offset`` on (``tag``: only
        messages with that tag, or any of a set); see MessageReader.get_messages."""
        return self._reader.get_messages(
            topic, queue_id, queue_offset, max_messages, max_bytes, tag, max_units_scanned
        )

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
        """``get_messages`` as the records' stored bytes (the fast pull)."""
        return self._reader.get_record_bytes(
            topic, queue_id, queue_offset, max_messages, max_bytes, tags, max_units_scanned
        )

    def query_by_key(
        self,
        topic: str,
        key: str,
        begin_ms: int = 0,
        end_ms: int | None = None,
        max_results: int = 32,
    ) -> list[MessageRecord]:
        """Messages of ``topic`` with ``key`` in KEYS or as UNIQ_KEY, newest first."""
        return self._reader.query_by_key(topic, key, begin_ms, end_ms, max_results)

    def queue_offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms``."""
        return self._reader.queue_offset_for_time(topic, queue_id, timestamp_ms)

    def get_by_message_id(self, msg_id: str) -> MessageRecord:
        """The message an offset message id names (valid on every replica)."""
        return self._reader.get_by_message_id(msg_id)

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._reader.min_queue_offset(topic, queue_id)

    def read_units(
        self, topic: str, queue_id: int, queue_offset: int, max_units: int
    ) -> list[ConsumeQueueUnit]:
        """Up to ``max_units`` dispatched ConsumeQueue units from ``queue_offset`` on: where
        each record lies and its tag field, without reading the records (the delay scheduler
        finds due messages by the delivery time a schedule unit holds). Units below
        ``min_queue_offset`` may point at records retention deleted; an offset below the
        queue's first unit is InvalidOffsetError (the answer would start elsewhere)."""
        queue = self._reader.check_queue(topic, queue_id)
        if queue_offset < queue.min_queue_offset:
            raise InvalidOffsetError(
                f"{topic}/{queue_id}: queue offset {queue_offset} is below the first unit "
                f"{queue.min_queue_offset}"
            )
        return queue.read(queue_offset, max_units)

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset to become visible."""
        return self._reader.max_queue_offset(topic, queue_id)

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
        with self._checkpointer.lock:
            return self._checkpointer.record(self._commit_log.flush(), self._flush_derived())

    def periodic_checkpoint(self) -> Checkpoint:
        """The housekeeping checkpoint: the CommitLog's flushed offset every time, derived
        data only when due (``consume_queue_flush_interval_ms``, or writes paused; see
        checkpointer.py)."""
        with self._checkpointer.lock:
            due = self._checkpointer.derived_due(self._dispatcher.dispatched_physical_offset)
            dispatched = self._flush_derived() if due else None
            return self._checkpointer.record(self._commit_log.flush(), dispatched)

    def _flush_derived(self) -> int:
        """Make ConsumeQueues and the index durable; returns the dispatched offset below which
        they now are."""
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
        return dispatched

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
        with self._checkpointer.lock, self._write_lock, self._dispatch_lock:
            self._checkpointer.lower(0, 0)
            self._write_behind.write_all()
            self._commit_log.replace_segments(source_dir, end_offset)
            for queue in self._all_consume_queues():
                queue.clear()
            self._index.truncate_from(0)
            self._dispatcher.reset(self._commit_log.min_offset)
            self._writer.forget_queue_offsets()

    def _housekeep(self) -> None:
        self.periodic_checkpoint()
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


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


__all__ = [
    "COMMIT_LOG_DIR",
    "BlockEntry",
    "GetResult",
    "Message",
    "MessageStore",
    "PutResult",
    "RecordBytes",
]
