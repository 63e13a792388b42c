"""ProducerSequences: the idempotent producer's dedup on a master-slave master.

The same contract as the Raft mode's ProducerTable (client.proto, ProduceRequest.sequence):
``last + 1`` (or an unknown producer) is stored; ``<= last`` is a duplicate, answered with the
remembered outcome of one of the producer's last ``REMEMBERED_BATCHES`` batches, else
"forgotten"; ``> last + 1`` is a gap and nothing is written.

Rules this module keeps:
- The table lives in the master's memory only: a retry that reaches the same running master
  is stored once; after a master restart the producer is unknown again, so a batch whose
  answer was lost just before the crash can be stored twice (at-least-once, RocketMQ's own
  guarantee). docs/replication.md says so.
- One batch per producer at a time: ``hold(producer_id)`` serialises a producer's check,
  write and record, so two retries of one batch cannot both be stored.
- Bounded: producers idle for ``retention_ms`` are forgotten, swept at most once a second.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from raftlog.node.errors import SequenceForgottenError, SequenceGapError
from raftlog.node.write_path import ProduceOutcome

REMEMBERED_BATCHES = 8
_SWEEP_INTERVAL_S = 1.0


@dataclass(slots=True)
class _Producer:
    last_sequence: int = 0
    last_seen_s: float = 0.0
    outcomes: OrderedDict[int, ProduceOutcome] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)


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
    def earlier_outcome(
        producer: _Producer, producer_id: str, sequence: int
    ) -> ProduceOutcome | None:
        """None when ``sequence`` is to be stored; the earlier outcome for a duplicate.
        Raises SequenceGapError or SequenceForgottenError."""
        last = producer.last_sequence
        if last == 0 or sequence == last + 1:
            return None
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
        producer.outcomes[sequence] = outcome
        while len(producer.outcomes) > REMEMBERED_BATCHES:
            producer.outcomes.popitem(last=False)

    def _sweep(self, now_s: float) -> None:
        if now_s - self._swept_at_s < _SWEEP_INTERVAL_S:
            return
        self._swept_at_s = now_s
        cutoff = now_s - self._retention_s
        for producer_id in [p for p, s in self._producers.items() if s.last_seen_s < cutoff]:
            del self._producers[producer_id]

    def __len__(self) -> int:
        return len(self._producers)
