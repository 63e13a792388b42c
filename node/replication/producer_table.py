"""ProducerTable: the idempotent producers' last stored sequences, so a retried batch is stored
once, also across a leader change (Kafka's idempotent producer; RocketMQ has none).

State is derived from the Raft log only: a ``ProduceMarker`` is applied with its batch's entry,
on every replica, so a new leader knows every sequence its predecessor committed. On restart the
table comes back from the applied-state checkpoint (``export``/``restore``, applied_state.py)
and the entries after it; without one, replaying the retained log rebuilds it.

Rules this module keeps (the ProduceRequest.sequence contract in client.proto):
- ``sequence == last + 1`` (or an unknown producer): store it.
- ``sequence <= last``: a duplicate; answered from the remembered entry if it is one of the
  last ``REMEMBERED_BATCHES`` of that producer, else "forgotten" (stored once, offsets lost).
- ``sequence > last + 1``: a gap; nothing is written. Up to ``MAX_SEQUENCES_AHEAD`` past the
  next expected number it is ``early`` instead: a producer with several requests in flight may
  reach the leader out of order, and the leader holds such a batch briefly for its
  predecessors (proposals.py) before it calls it a gap.
- The leader also counts sequences proposed but not yet applied (``pending``), so several
  batches of one producer may be in flight in order; pending state is dropped with leadership
  (``restore_pending`` puts back what a refused proposal batch had counted).
- Producers idle for longer than ``retention_ms`` are forgotten (bounded memory). Time is the
  markers' store timestamps (stamped by the leader, in the log), so every replica forgets the
  same producers at the same point of the log. A forgotten producer is unknown: its next batch
  is stored whatever its sequence (as Kafka does after producer-state expiry).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

REMEMBERED_BATCHES = 8
# How far past the next expected sequence a batch is "early" rather than a gap: a client's
# in-flight window (it must not exceed REMEMBERED_BATCHES, or a resent window could ask for
# outcomes no longer remembered).
MAX_SEQUENCES_AHEAD = REMEMBERED_BATCHES - 1
_EXPIRY_SWEEP_INTERVAL_MS = 1000


@dataclass(slots=True)
class _Producer:
    last_sequence: int
    last_seen_ms: int
    # sequence -> (raft index, raft term) of the entry that stored it, newest last.
    batches: OrderedDict[int, tuple[int, int]] = field(default_factory=OrderedDict)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a batch: ``store``, or ``duplicate`` (answer from ``entry``, or
    forgotten when ``entry`` is None and ``pending`` is False), or ``wait`` for the pending
    proposal of the same sequence, or ``early`` (its predecessors may still arrive), or
    ``gap``."""

    action: str
    entry: tuple[int, int] | None = None


class ProducerTable:
    def __init__(self, retention_ms: int) -> None:
        self._retention_ms = retention_ms
        self._producers: dict[str, _Producer] = {}
        self._pending: dict[str, int] = {}
        self._expired_at_ms = 0

    def check(self, producer_id: str, sequence: int) -> Verdict:
        """The verdict for a batch the leader is about to propose."""
        producer = self._producers.get(producer_id)
        if producer is None and producer_id not in self._pending:
            return Verdict("store")
        last = producer.last_sequence if producer is not None else 0
        pending = self._pending.get(producer_id, last)
        if sequence == pending + 1:
            return Verdict("store")
        if sequence > pending + 1 + MAX_SEQUENCES_AHEAD:
            return Verdict("gap")
        if sequence > pending + 1:
            return Verdict("early")
        if sequence > last:
            return Verdict("wait")
        entry = producer.batches.get(sequence) if producer is not None else None
        return Verdict("duplicate", entry)

    def propose(self, producer_id: str, sequence: int) -> None:
        self._pending[producer_id] = sequence

    def pending(self, producer_id: str) -> int | None:
        """The producer's last proposed, unapplied sequence (None: none pending)."""
        return self._pending.get(producer_id)

    def restore_pending(self, saved: dict[str, int | None]) -> None:
        """Put back each producer's pending sequence as ``pending`` returned it."""
        for producer_id, sequence in saved.items():
            if sequence is None:
                self._pending.pop(producer_id, None)
            else:
                self._pending[producer_id] = sequence

    def drop_pending(self) -> None:
        """Leadership lost (or proposals dropped): forget what was proposed, not applied."""
        self._pending.clear()

    def apply(self, producer_id: str, sequence: int, entry: tuple[int, int], now_ms: int) -> None:
        """A committed marker: record it (every replica, in log order)."""
        producer = self._producers.get(producer_id)
        if producer is None:
            producer = self._producers[producer_id] = _Producer(0, now_ms)
        if sequence <= producer.last_sequence:
            return  # a duplicate stored twice cannot happen; replay of an applied entry can
        producer.last_sequence = sequence
        producer.last_seen_ms = now_ms
        producer.batches[sequence] = entry
        while len(producer.batches) > REMEMBERED_BATCHES:
            producer.batches.popitem(last=False)
        if self._pending.get(producer_id, 0) <= sequence:
            self._pending.pop(producer_id, None)
        self._expire(now_ms)

    def _expire(self, now_ms: int) -> None:
        # A sweep per second of log time, not per batch: the sweep walks every producer.
        if now_ms - self._expired_at_ms < _EXPIRY_SWEEP_INTERVAL_MS:
            return
        self._expired_at_ms = now_ms
        cutoff = now_ms - self._retention_ms
        for producer_id in [p for p, s in self._producers.items() if s.last_seen_ms < cutoff]:
            del self._producers[producer_id]

    def export(self) -> dict[str, object]:
        """The applied state (not the leader's pending sequences), as JSON values: what the
        applied-state checkpoint keeps (applied_state.py)."""
        return {
            "expired_at_ms": self._expired_at_ms,
            "producers": [
                [
                    producer_id,
                    producer.last_sequence,
                    producer.last_seen_ms,
                    [
                        [sequence, index, term]
                        for sequence, (index, term) in producer.batches.items()
                    ],
                ]
                for producer_id, producer in self._producers.items()
            ],
        }

    def restore(self, exported: object) -> None:
        """Replace the applied state by what ``export`` returned (a restart from the
        checkpoint); ValueError, nothing changed, when it is not of that shape."""
        if not isinstance(exported, dict):
            raise ValueError(f"not an exported producer table: {type(exported).__name__}")
        try:
            producers: dict[str, _Producer] = {}
            for producer_id, last_sequence, last_seen_ms, batches in exported["producers"]:
                producers[str(producer_id)] = _Producer(
                    int(last_sequence),
                    int(last_seen_ms),
                    OrderedDict((int(s), (int(i), int(t))) for s, i, t in batches),
                )
            expired_at_ms = int(exported["expired_at_ms"])
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not an exported producer table: {error!r}") from error
        self._producers = producers
        self._expired_at_ms = expired_at_ms

    def __len__(self) -> int:
        return len(self._producers)
