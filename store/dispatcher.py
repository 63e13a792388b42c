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
  verified when it was written or recovered, so nothing is checked twice here.
- Single caller at a time (the store serialises ``dispatch``).
"""

from __future__ import annotations

from collections.abc import Callable

from raftlog.store.commit_log import CommitLog
from raftlog.store.consume_queue import ConsumeQueue, encode_unit
from raftlog.store.hashing import key_hash, tag_hash
from raftlog.store.index_file import IndexPut, IndexService
from raftlog.store.record import read_dispatch_info

DEFAULT_BATCH_RECORDS = 4096

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

    @property
    def dispatched_physical_offset(self) -> int:
        """Every record below this physical offset is visible to readers."""
        return self._dispatched_physical_offset

    def reset(self, dispatched_physical_offset: int) -> None:
        """Restart dispatch at ``dispatched_physical_offset`` (after recovery or a truncation
        removed what lay past it)."""
        self._dispatched_physical_offset = dispatched_physical_offset

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
        for physical_offset, view in self._commit_log.scan(self._dispatched_physical_offset, bound):
            topic, queue_id, queue_offset, _, size, timestamp_ms, tags, keys, uniq_key = (
                read_dispatch_info(view, 0)
            )
            if physical_offset + size > bound:
                reached = physical_offset
                break
            queue_key = (topic, queue_id)
            pending = units.get(queue_key)
            if pending is None:
                pending = units[queue_key] = (queue_offset, bytearray())
            pending[1].extend(encode_unit(physical_offset, size, tag_hash(tags)))
            for key in keys:
                append_put((key_hash(topic, key), physical_offset, timestamp_ms))
            if uniq_key:
                append_put((key_hash(topic, uniq_key), physical_offset, timestamp_ms))
            batch_count += 1
            if batch_count == self._batch_records:
                self._write(units, puts, physical_offset + size)
                dispatched_count += batch_count
                batch_count = 0
        self._write(units, puts, reached)
        return dispatched_count + batch_count

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
