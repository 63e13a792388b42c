"""ProducerSequences.rebuild: the markers a new master replays include the tail readers cannot
see yet (a promoted slave's unconfirmed bytes), so a producer's retry after a failover is never
stored a second time; and a producer whose batches a failover took back is not wedged by the
gap they leave."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.node.control import CONTROL_QUEUE_ID, CONTROL_TOPIC, ProduceMarker, control_message
from raftlog.node.errors import SequenceGapError
from raftlog.node.masterslave.sequences import EARLY_WAIT_S, ProducerSequences
from raftlog.node.write_path import ProduceOutcome
from raftlog.store.message import Message
from raftlog.store.message_store import MessageStore
from tests.unit.store.test_message_store import small_config


@contextlib.contextmanager
def rebuilt_after_sequence_4(tmp_path: Path) -> Iterator[ProducerSequences]:
    """A new master's sequences, rebuilt from a log whose last marker is p1's sequence 4."""
    store = MessageStore.open(small_config(tmp_path), housekeeping_interval_ms=None)
    try:
        store.create_topic(CONTROL_TOPIC, CONTROL_QUEUE_ID + 1)
        store.put_messages([control_message(ProduceMarker("p1", 4))])
        sequences = ProducerSequences(retention_ms=60_000)
        sequences.rebuild(store, now_ms=int(time.time() * 1000))
        yield sequences
    finally:
        store.close()


def test_rebuild_replays_visible_and_unconfirmed_markers(tmp_path: Path) -> None:
    bound = [0]
    store = MessageStore.open(
        small_config(tmp_path), dispatch_bound=lambda: bound[0], housekeeping_interval_ms=None
    )
    try:
        store.create_topic(CONTROL_TOPIC, CONTROL_QUEUE_ID + 1)
        store.create_topic("orders", 1)
        store.put_messages([Message("orders", 0, b"a"), control_message(ProduceMarker("p1", 1))])
        bound[0] = store.commit_log.max_offset  # confirmed: readers see the first marker
        store.dispatch()
        store.put_messages([Message("orders", 0, b"b"), control_message(ProduceMarker("p1", 2))])
        store.put_messages([Message("orders", 0, b"c"), control_message(ProduceMarker("p2", 7))])
        assert store.dispatched_physical_offset < store.commit_log.max_offset  # a hidden tail
        sequences = ProducerSequences(retention_ms=60_000)
        assert sequences.rebuild(store, now_ms=int(time.time() * 1000)) == 3
        with sequences.hold("p1") as p1:
            assert p1.last_sequence == 2
        with sequences.hold("p2") as p2:
            assert p2.last_sequence == 7
    finally:
        store.close()


def test_a_gap_is_accepted_only_as_the_first_batch_after_a_rebuild(tmp_path: Path) -> None:
    with rebuilt_after_sequence_4(tmp_path) as sequences:
        outcome = ProduceOutcome([], [], 0, False, 0, 0)
        with sequences.hold("p1") as p1:
            # 5 and 6 were answered by the previous master and lost with its tail.
            assert ProducerSequences.earlier_outcome(p1, "p1", 7) is None
            ProducerSequences.record(p1, 7, outcome)
            with pytest.raises(SequenceGapError):  # this master's own log has no holes
                ProducerSequences.earlier_outcome(p1, "p1", 9)
            duplicate = ProducerSequences.earlier_outcome(p1, "p1", 7)
            assert duplicate is not None and duplicate.duplicate


def test_a_batch_that_overtook_its_predecessor_after_a_rebuild_waits_for_it(
    tmp_path: Path,
) -> None:
    """Sequences 5 and 6 in flight to a new master, 6 first: 6 waits for 5 instead of being
    stored as the first batch after the rebuild (which would answer 5 "stored once")."""
    with rebuilt_after_sequence_4(tmp_path) as sequences:
        order: list[int] = []

        def produce(sequence: int) -> None:
            with sequences.hold("p1") as p1:
                sequences.await_turn(p1, sequence)
                assert ProducerSequences.earlier_outcome(p1, "p1", sequence) is None
                order.append(sequence)
                ProducerSequences.record(p1, sequence, ProduceOutcome([], [], 0, False, 0, 0))

        ahead = threading.Thread(target=produce, args=(6,))
        ahead.start()
        time.sleep(0.1)  # 6 waits, without holding the producer
        produce(5)
        ahead.join(5)
        assert order == [5, 6]
        began = time.monotonic()
        with sequences.hold("p1") as p1:  # 8's predecessor never comes: a gap, after the wait
            sequences.await_turn(p1, 8)
            with pytest.raises(SequenceGapError):
                ProducerSequences.earlier_outcome(p1, "p1", 8)
        assert EARLY_WAIT_S * 0.9 <= time.monotonic() - began < 5.0
