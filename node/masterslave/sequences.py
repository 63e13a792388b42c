"""ProducerSequences: the idempotent producer's dedup on a master-slave master.

The same contract as the Raft mode's ProducerTable (client.proto, ProduceRequest.sequence):
``last + 1`` (or an unknown producer) is stored; ``<= last`` is a duplicate, answered with the
remembered outcome of one of the producer's last ``REMEMBERED_BATCHES`` batches, else
"forgotten"; ``> last + 1`` is a gap and nothing is written.

Rules this module keeps:
- The table is rebuilt from the log: every idempotent batch is written with a marker record
  (producer id, sequence) right after its records, in the same append, so a marker on disk
  means its whole batch is; a master that starts, or a slave promoted, replays the markers of
  the last ``retention_ms`` (``rebuild``) before it takes writes. A retry of a batch stored
  before that is answered "stored once, offsets forgotten" (its offsets are not in the log's
  markers), never stored twice. The one gap: after a power loss, a torn write may keep a
  prefix of a batch's records without its marker (docs/replication.md).
- A gap is refused (nothing written) except as a producer's first batch after a rebuild: a
  master-slave group may lose a tail on failover (an ASYNC_MASTER's acknowledged writes, a
  SYNC_MASTER's "stored, not replicated" ones, an ASYNC_FLUSH master's unflushed bytes), and
  the producer cannot resend batches it was already answered for. Refusing that gap would
  wedge the producer for good (every later batch a gap); the loss is the mode's documented
  window, not something the gap can undo. Within one master's run its log has no holes, so a
  gap there is still a client's error.
- One batch per producer at a time: ``hold(producer_id)`` serialises a producer's check,
  write and record, so two retries of one batch cannot both be stored.
- A batch up to ``MAX_SEQUENCES_AHEAD`` past the next expected number waits (``await_turn``,
  the producer's lock released) up to ``EARLY_WAIT_S`` for its predecessors before it is
  judged: a client with several requests in flight may have them reach the master out of
  order, and after a rebuild the gap rule above would otherwise store the later batch and
  answer its predecessors "stored once" when they arrive.
- Bounded: producers idle for ``retention_ms`` are forgotten, swept at most once a second.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from raftlog.node.control import (
    CONTROL_QUEUE_ID,
    CONTROL_TOPIC,
    ProduceMarker,
    control_command_of,
    decode_command,
)
from raftlog.node.errors import SequenceForgottenError, SequenceGapError
from raftlog.node.write_path import ProduceOutcome
from raftlog.store.message_store import MessageStore

REMEMBERED_BATCHES = 8
# As the Raft leader's (node/replication/producer_table.py, proposals.py).
MAX_SEQUENCES_AHEAD = REMEMBERED_BATCHES - 1
EARLY_WAIT_S = 0.5
_SWEEP_INTERVAL_S = 1.0


@dataclass(slots=True)
class _Producer:
    last_sequence: int = 0
    last_seen_s: float = 0.0
    outcomes: OrderedDict[int, ProduceOutcome] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Known only from the log's markers (rebuild): this master has not stored a batch of it.
    replayed: bool = False
    # Notified (under ``lock``) when a batch is recorded: early batches wait on it.
    recorded: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.recorded = threading.Condition(self.lock)


class ProducerSequences:
    def __init__(self, retention_ms: int) -> None:
        self._retention_s = retention_ms / 1000
        self._producers: dict[str, _Producer] = {}
        self._lock = threading.Lock()
        self._swept_at_s = 0.0

    @contextmanager
    def hold(self, producer_id: str) -> Iterator[_Producer]:
        """The producer's state, held for one batch's check, write and record."""
        now_s = time.monotonic()
        with self._lock:
            self._sweep(now_s)
            producer = self._producers.get(producer_id)
            if producer is None:
                producer = self._producers[producer_id] = _Producer(last_seen_s=now_s)
        with producer.lock:
            producer.last_seen_s = now_s
            yield producer

    @staticmethod
    def await_turn(producer: _Producer, sequence: int) -> None:
        """Within ``hold``: let a batch a few numbers ahead wait for its predecessors."""
        deadline_s = time.monotonic() + EARLY_WAIT_S
        while (
            0
            < producer.last_sequence + 1
            < sequence
            <= (producer.last_sequence + 1 + MAX_SEQUENCES_AHEAD)
        ):
            remaining_s = deadline_s - time.monotonic()
            if remaining_s <= 0:
                return
            producer.recorded.wait(remaining_s)

    @staticmethod
    def earlier_outcome(
        producer: _Producer, producer_id: str, sequence: int
    ) -> ProduceOutcome | None:
        """None when ``sequence`` is to be stored; the earlier outcome for a duplicate.
        Raises SequenceGapError or SequenceForgottenError."""
        last = producer.last_sequence
        if last == 0 or sequence == last + 1:
            return None
        if sequence > last + 1 and producer.replayed:
            return None  # the batches between were lost with a previous master's tail
        if sequence > last + 1:
            raise SequenceGapError(
                f"producer {producer_id!r} sent sequence {sequence} after {last}: an earlier "
                "batch was never stored; nothing was written"
            )
        outcome = producer.outcomes.get(sequence)
        if outcome is None:
            raise SequenceForgottenError(
                f"producer {producer_id!r} sequence {sequence} was stored once; its offsets "
                "are no longer remembered"
            )
        return replace(outcome, duplicate=True)

    @staticmethod
    def record(producer: _Producer, sequence: int, outcome: ProduceOutcome) -> None:
        producer.last_sequence = sequence
        producer.replayed = False
        producer.outcomes[sequence] = outcome
        while len(producer.outcomes) > REMEMBERED_BATCHES:
            producer.outcomes.popitem(last=False)
        producer.recorded.notify_all()

    def rebuild(self, store: MessageStore, now_ms: int) -> int:
        """Forget everything, then replay the markers ``store`` holds from the last
        ``retention_ms``: those readers can see (through the control queue) and those in the
        tail not yet visible (a promoted slave's unconfirmed bytes, scanned from the
        CommitLog: they are now this master's log). Returns how many were replayed."""
        with self._lock:
            self._producers = {}
        markers = self._visible_markers(store, now_ms) + _tail_markers(store)
        now_s = time.monotonic()
        for marker in markers:
            producer = self._producers.setdefault(
                marker.producer_id, _Producer(last_seen_s=now_s, replayed=True)
            )
            producer.last_sequence = max(producer.last_sequence, marker.sequence)
        return len(markers)

    def _visible_markers(self, store: MessageStore, now_ms: int) -> list[ProduceMarker]:
        offset = store.queue_offset_for_time(
            CONTROL_TOPIC, CONTROL_QUEUE_ID, max(0, now_ms - int(self._retention_s * 1000))
        )
        markers: list[ProduceMarker] = []
        for _ in range(1_000_000):  # bounded: a page of up to 1,024 records per round
            page = store.get_messages(CONTROL_TOPIC, CONTROL_QUEUE_ID, offset, max_messages=1024)
            for record in page.messages:
                command = decode_command(record.body)
                if isinstance(command, ProduceMarker):
                    markers.append(command)
            if page.next_queue_offset <= offset:
                break
            offset = page.next_queue_offset
        return markers

    def _sweep(self, now_s: float) -> None:
        if now_s - self._swept_at_s < _SWEEP_INTERVAL_S:
            return
        self._swept_at_s = now_s
        cutoff = now_s - self._retention_s
        for producer_id in [p for p, s in self._producers.items() if s.last_seen_s < cutoff]:
            del self._producers[producer_id]

    def __len__(self) -> int:
        return len(self._producers)


def _tail_markers(store: MessageStore) -> list[ProduceMarker]:
    """The markers between what readers see and the CommitLog's end."""
    log = store.commit_log
    markers: list[ProduceMarker] = []
    for _, record in log.scan(store.dispatched_physical_offset, log.max_offset):
        found = control_command_of(bytes(record))
        if found is not None and isinstance(found[0], ProduceMarker):
            markers.append(found[0])
    return markers
