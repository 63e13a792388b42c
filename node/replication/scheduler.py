"""Scheduler: the Raft leader's delay scheduler. It moves due messages of the schedule topic to
their real topics, each delivery batch in ONE Raft entry together with the progress it makes.

Every turn (every 50 ms, or at once after a full batch), on the leader only and once it is
write-ready (its inherited log applied, so the ScheduleTable shows every committed delivery):
1. the level queues: from each queue's ``low``, the run of due units (messaging/due.py);
2. the timer queue: units not seen yet go into the TimerHeap (built again in each term from
   the table), and the due ones come off its top;
3. the due records are read, their copies built (messaging/rewrite.py ``delivered_copy``),
   and one entry proposed: a ``ScheduleProgress`` record first, then the copies (control.py).
   Every replica applies the progress with the copies, so after a leader change the new
   leader resumes exactly where the committed log says: no delivery lost, none repeated.

Rules this module keeps:
- At most one delivery entry in flight, and none proposed while an earlier one's outcome is
  unknown: every decision is made on a table that shows every delivery before it.
- An entry is proposed only in the term its decision was made in (``required_term``): a
  member that lost leadership and won it back decides again on what its successors left.
- A schedule record that names no destination, or a topic or queue that does not exist, is
  marked done without a copy and logged (it could never be delivered).
- The clock is the leader's wall clock, against the delivery time the leader stamped.
- Raft mode only: a master-slave node refuses delay messages (node/services/producer.py).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import defaultdict

from raftlog.node.control import ScheduleProgress, control_message
from raftlog.node.errors import NodeError
from raftlog.node.messaging.delay import MAX_DELAY_LEVELS, TIMER_QUEUE_ID
from raftlog.node.messaging.due import BatchRoom, DueMessage, TimerHeap, due_run
from raftlog.node.messaging.rewrite import delivered_copy
from raftlog.node.messaging.schedule_table import SCHEDULE_GROUP
from raftlog.node.replication.proposals import Proposal
from raftlog.node.replication.replica import Replica
from raftlog.store.errors import StoreError
from raftlog.store.hashing import SCHEDULE_TOPIC
from raftlog.store.message_store import BlockEntry, Message
from raftlog.store.record import MessageRecord

_log = logging.getLogger(__name__)

TURN_INTERVAL_S = 0.05
_UNITS_PER_READ = 1024
_MAX_BATCH_MESSAGES = 256
_MAX_BATCH_BYTES = 1 << 20
_LOOP_TIMEOUT_S = 2.0
# How long a turn waits for its entry to apply; past that its outcome is unknown, and the
# scheduler proposes nothing until the entry's index is applied (its own or a replacement).
_DELIVERY_WAIT_S = 5.0


class Scheduler:
    """The delay scheduler of one Raft member (idle unless it leads)."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica
        self._store = replica.store
        self._table = replica.ready.schedule
        self._max_batch_bytes = min(
            _MAX_BATCH_BYTES, self._store.commit_log.segment_size_bytes // 4
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delay-scheduler", daemon=True)
        self._pending: Proposal | None = None
        self._timer: TimerHeap | None = None
        # Level queue -> (its low, the delivery time of the unit there): skipped until then.
        self._heads: dict[int, tuple[int, int]] = {}
        self.delivered_count = 0

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(_DELIVERY_WAIT_S + _LOOP_TIMEOUT_S)

    def _run(self) -> None:
        while not self._stop.is_set():
            full = False
            try:
                full = self._turn()
            except (NodeError, StoreError, TimeoutError) as error:
                _log.warning("delay scheduler: %s; trying again", error)
                self._forget()
            except Exception:  # a bug must not end delivery for good: log and go on
                _log.exception("delay scheduler turn failed")
                self._forget()
            if not full:
                self._stop.wait(TURN_INTERVAL_S)

    def _forget(self) -> None:
        """Drop what was derived from the table: the next turn reads it again."""
        self._timer = None
        self._heads.clear()

    def _turn(self) -> bool:
        """One turn; True when it delivered a full batch (more may be due at once)."""
        pending = self._pending
        if pending is not None:
            if not pending.future.done():
                return False
            self._pending = None
            self._forget()
        term = self._leader_term()
        if term is None:
            self._forget()
            return False
        now_ms = time.time_ns() // 1_000_000
        room = BatchRoom(_MAX_BATCH_MESSAGES, self._max_batch_bytes)
        due = self._due_in_levels(now_ms, room)
        due += self._due_in_timer(term, now_ms, room, batch_empty=not due)
        if not due:
            return False
        self._deliver(due, term)
        return room.messages <= 0 or room.size_bytes <= 0

    def _leader_term(self) -> int | None:
        """This member's term when it leads and takes writes, else None."""
        return self._replica.leading_term(_LOOP_TIMEOUT_S)

    # ------------------------------------------------------------------ deciding

    def _low(self, queue_id: int) -> int:
        """Where ``queue_id`` is done up to: the table's, or its store mirror's when that is
        further (a member that installed a snapshot has the mirror, not the records)."""
        mirrored = self._store.fetch_consumer_offset(SCHEDULE_GROUP, SCHEDULE_TOPIC, queue_id)
        return max(self._table.low(queue_id), mirrored or 0)

    def _due_in_levels(self, now_ms: int, room: BatchRoom) -> list[DueMessage]:
        """Each level queue's due run. Every level queue is looked at, configured or not, so
        a smaller level table never strands what an earlier one stored."""
        store = self._store
        due: list[DueMessage] = []
        for queue_id in range(MAX_DELAY_LEVELS):
            low = self._low(queue_id)
            head = self._heads.get(queue_id)
            if head is not None and head[0] == low and head[1] > now_ms:
                continue
            end = store.max_queue_offset(SCHEDULE_TOPIC, queue_id)
            if low >= end:
                continue
            start = max(low, store.min_queue_offset(SCHEDULE_TOPIC, queue_id))
            units = store.read_units(
                SCHEDULE_TOPIC, queue_id, start, min(_UNITS_PER_READ, end - start)
            )
            run, next_deliver_ms = due_run(queue_id, start, units, now_ms, room, not due)
            due += run
            if next_deliver_ms is not None:
                self._heads[queue_id] = (start + len(run), next_deliver_ms)
            if room.messages <= 0:
                break
        return due

    def _due_in_timer(
        self, term: int, now_ms: int, room: BatchRoom, *, batch_empty: bool
    ) -> list[DueMessage]:
        """The timer queue's due messages (its heap is built again in each term)."""
        store = self._store
        timer = self._timer
        done: frozenset[int] = frozenset()
        if timer is None or timer.term != term:
            done = self._table.progress(TIMER_QUEUE_ID)[1]
            start = max(
                self._low(TIMER_QUEUE_ID), store.min_queue_offset(SCHEDULE_TOPIC, TIMER_QUEUE_ID)
            )
            timer = self._timer = TimerHeap(TIMER_QUEUE_ID, term, start)
        end = store.max_queue_offset(SCHEDULE_TOPIC, TIMER_QUEUE_ID)
        while timer.scanned_to < end:
            units = store.read_units(
                SCHEDULE_TOPIC,
                TIMER_QUEUE_ID,
                timer.scanned_to,
                min(4 * _UNITS_PER_READ, end - timer.scanned_to),
            )
            if not units:
                break
            timer.add(timer.scanned_to, units, done)
        return timer.pop_due(now_ms, room, batch_empty)

    # ------------------------------------------------------------------ delivering

    def _deliver(self, due: list[DueMessage], term: int) -> None:
        """Propose the copies of ``due`` with their progress, and wait (bounded) for them."""
        places = sorted((d.physical_offset, d.size_bytes) for d in due)
        records = {r.physical_offset: r for r in self._store.commit_log.read_records(places)}
        copies = [
            copy
            for copy in (self._copy(records[d.physical_offset]) for d in sorted(due))
            if copy is not None
        ]
        progress = self._progress(due)
        block, entries = self._encode(progress, copies)
        proposal = Proposal(block, entries, control=progress, required_term=term)
        self._replica.submit(proposal)
        self._pending = proposal
        try:
            proposal.future.result(timeout=_DELIVERY_WAIT_S)
        except concurrent.futures.TimeoutError:
            _log.warning("delay scheduler: a delivery's outcome is unknown; waiting for it")
            return
        except (NodeError, StoreError) as error:
            _log.info("delay scheduler: delivery not made (%s); deciding again", error)
            self._forget()
        else:
            self.delivered_count += len(copies)
        self._pending = None

    def _copy(self, record: MessageRecord) -> Message | None:
        """The delivered copy of ``record``, or None (logged) when it cannot be delivered."""
        copy = delivered_copy(record)
        if copy is None:
            _log.warning(
                "schedule record at %d names no destination; skipped", record.physical_offset
            )
            return None
        try:
            queue_count = self._store.describe_topic(copy.topic).queue_count
        except StoreError as error:
            _log.warning("delayed message to %s dropped: %s", copy.topic, error)
            return None
        if not 0 <= copy.queue_id < queue_count:
            _log.warning(
                "delayed message to %s/%d dropped: the topic has %d queues",
                copy.topic,
                copy.queue_id,
                queue_count,
            )
            return None
        return copy

    def _progress(self, due: list[DueMessage]) -> ScheduleProgress:
        """The table's progress once ``due`` is delivered, per queue."""
        store = self._store
        offsets: dict[int, list[int]] = defaultdict(list)
        for message in due:
            offsets[message.queue_id].append(message.queue_offset)
        queues = []
        for queue_id, done in sorted(offsets.items()):
            low, delivered = self._table.low_after(
                queue_id,
                done,
                max(self._low(queue_id), store.min_queue_offset(SCHEDULE_TOPIC, queue_id)),
                store.max_queue_offset(SCHEDULE_TOPIC, queue_id),
            )
            queues.append((queue_id, low, delivered))
        return ScheduleProgress(tuple(queues))

    def _encode(
        self, progress: ScheduleProgress, copies: list[Message]
    ) -> tuple[bytearray, list[BlockEntry]]:
        """The entry's block; a copy the store refuses (logged) is left out, never the rest."""
        store = self._store
        try:
            return store.encode_messages([control_message(progress), *copies])
        except StoreError:
            kept = []
            for copy in copies:
                try:
                    store.encode_messages([copy])
                except StoreError as error:
                    _log.warning("delayed message to %s dropped: %s", copy.topic, error)
                    continue
                kept.append(copy)
            return store.encode_messages([control_message(progress), *kept])
