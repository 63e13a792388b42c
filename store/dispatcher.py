"""Dispatch (RocketMQ's reput): make CommitLog records visible through ConsumeQueues and the
IndexFile.

Rules this module keeps:
- Dispatch reads the CommitLog forward from ``dispatched_physical_offset`` and never past the
  bound its caller gives. In Raft mode the bound is the commit index, so readers never see a
  message a failover could erase. A record that straddles the bound waits for a later call.
- Units are appended per topic/queue in batches, and index entries in one batch, every
  ``batch_records`` records at most, so memory stays bounded however far a call reaches.
- The dispatched offset moves only after a batch's units and entries are written, so a reader
  or a checkpoint never sees it ahead of the data.
- Per-record work is one ``read_dispatch_info`` plus CRC32 calls (hashing.py); the record was
  verified when it was written or recovered, so nothing is checked twice here. A schedule
  topic record is decoded whole: its unit holds its delivery time (``unit_tag_hash``).
- A writer that already knows what dispatch needs of the records it just appended (their
  place, queue offset, tag hash and key hashes) hands it over with ``expect``, in log order,
  right after the append, with where the log ended before it. Dispatch then takes those
  instead of reading and parsing the records again, but only while each one's predecessor
  ended exactly where dispatch stands; anything else (records written another way, such as
  a Raft follower's; a writer that has appended but not yet called ``expect``) is read from
  the CommitLog as before, and expectations it already passed are dropped. At most
  ``MAX_EXPECTED_RECORDS`` wait: beyond that they are dropped and dispatch reads.
- Single caller at a time (the store serialises ``dispatch``); ``expect`` is called by the
  single writer, ``forget_expected`` with both the writer's and dispatch's locks held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

from raftlog.store.commit_log import CommitLog
from raftlog.store.consume_queue import ConsumeQueue, encode_unit
from raftlog.store.hashing import SCHEDULE_TOPIC, key_hash, tag_hash, unit_tag_hash
from raftlog.store.index_file import IndexPut, IndexService
from raftlog.store.record import decode_record, read_dispatch_info

DEFAULT_BATCH_RECORDS = 4096
MAX_EXPECTED_RECORDS = 1 << 16

DispatchRecord = tuple[int, int, tuple[str, int], int, int, tuple[int, ...], int]
"""What dispatch needs of one record: ``(physical_offset, size, (topic, queue_id),
queue_offset, tag_hash, key_hashes, store_timestamp_ms)``; ``key_hashes`` holds the IndexFile
hash of every key and of the unique key."""

ConsumeQueueOf = Callable[[str, int], ConsumeQueue]
"""Gives the ConsumeQueue of ``(topic, queue_id)``, creating it when new."""


class Dispatcher:
    def __init__(
        self,
        commit_log: CommitLog,
        consume_queue_of: ConsumeQueueOf,
        index: IndexService,
        dispatched_physical_offset: int,
        batch_records: int = DEFAULT_BATCH_RECORDS,
    ) -> None:
        assert batch_records >= 1
        self._commit_log = commit_log
        self._consume_queue_of = consume_queue_of
        self._index = index
        self._dispatched_physical_offset = dispatched_physical_offset
        self._batch_records = batch_records
        # (where the log ended before the record, the record), in log order.
        self._expected: deque[tuple[int, DispatchRecord]] = deque()

    @property
    def dispatched_physical_offset(self) -> int:
        """Every record below this physical offset is visible to readers."""
        return self._dispatched_physical_offset

    def reset(self, dispatched_physical_offset: int) -> None:
        """Restart dispatch at ``dispatched_physical_offset`` (after recovery or a truncation
        removed what lay past it)."""
        self._dispatched_physical_offset = dispatched_physical_offset
        self._expected.clear()

    def expect(self, log_end_before: int, records: Iterable[DispatchRecord]) -> None:
        """What dispatch needs of records just appended back to back (after an end-of-segment
        blank, if the append rolled) where the CommitLog ended at ``log_end_before``."""
        expected = self._expected
        previous_end = log_end_before
        for record in records:
            expected.append((previous_end, record))
            previous_end = record[0] + record[1]
        if len(expected) > MAX_EXPECTED_RECORDS:
            expected.clear()

    def forget_expected(self) -> None:
        """Drop every expectation (the CommitLog was cut or replaced under them)."""
        self._expected.clear()

    def dispatch(self, up_to_physical_offset: int) -> int:
        """Dispatch every whole record in ``[dispatched_physical_offset, up_to)``; returns how
        many records were dispatched."""
        bound = min(up_to_physical_offset, self._commit_log.max_offset)
        if bound <= self._dispatched_physical_offset:
            return 0
        units: dict[tuple[str, int], tuple[int, bytearray]] = {}
        puts: list[IndexPut] = []
        batch_count = dispatched_count = 0
        # Where dispatch stands once the current batch is written.
        reached = bound
        append_put = puts.append
        for (
            physical_offset,
            size,
            queue_key,
            queue_offset,
            tag,
            key_hashes,
            timestamp_ms,
        ) in self._records(bound):
            if physical_offset + size > bound:
                reached = physical_offset
                break
            pending = units.get(queue_key)
            if pending is None:
                pending = units[queue_key] = (queue_offset, bytearray())
            pending[1].extend(encode_unit(physical_offset, size, tag))
            for hash_value in key_hashes:
                append_put((hash_value, physical_offset, timestamp_ms))
            batch_count += 1
            if batch_count == self._batch_records:
                self._write(units, puts, physical_offset + size)
                dispatched_count += batch_count
                batch_count = 0
        self._write(units, puts, reached)
        return dispatched_count + batch_count

    def _records(self, bound: int) -> Iterator[DispatchRecord]:
        """The records from the dispatched offset on: the expected ones while they continue
        where dispatch stands, then the rest read from the CommitLog up to ``bound``. A record
        is taken off the expectations only once the caller moved past it."""
        position = self._dispatched_physical_offset
        expected = self._expected
        while expected and expected[0][1][0] < position:
            expected.popleft()  # read from the CommitLog by an earlier call
        while expected and position < bound:
            previous_end, record = expected[0]
            if previous_end != position:
                expected.clear()
                break
            yield record
            expected.popleft()
            position = record[0] + record[1]
        if position < bound:
            yield from self._scanned(position, bound)

    def _scanned(self, start: int, bound: int) -> Iterator[DispatchRecord]:
        for physical_offset, view in self._commit_log.scan(start, bound):
            topic, queue_id, queue_offset, _, size, timestamp_ms, tags, keys, uniq_key = (
                read_dispatch_info(view, 0)
            )
            key_hashes = tuple([key_hash(topic, key) for key in keys])
            if uniq_key:
                key_hashes += (key_hash(topic, uniq_key),)
            if topic == SCHEDULE_TOPIC:
                # Its unit holds the delivery time, a property: the rare record parsed whole.
                tag = unit_tag_hash(topic, tags, decode_record(view, 0).properties)
            else:
                tag = tag_hash(tags)
            yield (
                physical_offset,
                size,
                (topic, queue_id),
                queue_offset,
                tag,
                key_hashes,
                timestamp_ms,
            )

    def _write(
        self,
        units: dict[tuple[str, int], tuple[int, bytearray]],
        puts: list[IndexPut],
        dispatched_physical_offset: int,
    ) -> None:
        for (topic, queue_id), (first_queue_offset, encoded) in units.items():
            self._consume_queue_of(topic, queue_id).append_units(first_queue_offset, encoded)
        if puts:
            self._index.put_batch(puts)
        units.clear()
        puts.clear()
        self._dispatched_physical_offset = dispatched_physical_offset
