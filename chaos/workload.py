"""The chaos workload: producers of unique values, consumer groups that poll and commit, and a
leader observer, all recording what they saw in a history (:class:`Recorder`).

* Each producer thread owns one idempotent typed :class:`~raftlog.client.Producer` and sends
  one message at a time; the body is a value unique in the run (``p<i>-<n>``), and the queue
  is chosen round-robin. ``ok`` carries the queue offset and physical offset acknowledged.
* Each consumer group has one thread that owns one typed :class:`~raftlog.client.Consumer` per
  queue (so every poll is about one known queue, and one group never has two readers on a
  queue at a time); it polls the queues in turn and commits about every second; now and then
  it closes a queue's consumer and opens a new one, which resumes from the committed offset.
* The leader observer asks every node for its own status a few times a second and records
  ``leader-observed`` for each new (leader, term) a node claims for itself.

Rules this module keeps (the history's, docs/chaos.md):
- A send answered "stored on the master, not replicated" (FLUSH_SLAVE_TIMEOUT,
  SLAVE_NOT_AVAILABLE) is ``info``, not ``ok``: a failover may take it back.
- ``fail`` only when the operation certainly did not happen: a producer's NotLeader,
  Unavailable, ResourceExhausted, InvalidArgument, NotFound or SequenceGap answer (nothing
  written; the client already turns "unknown, then refused" into UnknownOutcomeError). An
  UnknownOutcomeError, SequenceForgotten (stored, offsets forgotten), an internal error or any
  other exception is ``info``.
- Every loop is bounded by a count and by the run's deadline; every client call by a timeout.
- Each worker is one history process, and never has two operations open at once.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from raftlog.chaos.history import (
    COMMIT_OFFSETS,
    LEADER_OBSERVED,
    POLL,
    SEND,
    CommitValue,
    LeaderValue,
    PollValue,
    Recorder,
    SendValue,
)
from raftlog.chaos.target import Target
from raftlog.client import (
    Connection,
    Consumer,
    InvalidArgumentError,
    NotFoundError,
    NotLeaderError,
    Producer,
    RaftlogError,
    ResourceExhaustedError,
    SequenceGapError,
    UnavailableError,
)

# Producer errors that mean "nothing was written".
_NOT_WRITTEN = (
    NotLeaderError,
    UnavailableError,
    ResourceExhaustedError,
    InvalidArgumentError,
    NotFoundError,
    SequenceGapError,
)
MAX_OPS_PER_WORKER = 1_000_000
_OBSERVE_INTERVAL_S = 0.25
_COMMIT_INTERVAL_S = 1.0
_POLL_TIMEOUT_S = 0.2
# Chance, per commit, that the group reopens that queue's consumer (resume from the commit).
_REOPEN_PROBABILITY = 0.1


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """How much load: ``producers`` threads, each pausing ``send_interval_s`` between sends,
    ``groups`` consumer groups over ``queue_count`` queues of ``topic``. ``send_timeout_s``
    bounds one send, retries included; ``seed`` drives the consumers' reopen choices."""

    topic: str = "chaos"
    queue_count: int = 4
    producers: int = 3
    groups: int = 2
    send_interval_s: float = 0.01
    send_timeout_s: float = 10.0
    seed: int = 0


@dataclass
class WorkloadStats:
    """Counts kept while running, for progress lines (the checker counts from the history)."""

    sends_ok: int = 0
    sends_failed: int = 0
    sends_unknown: int = 0
    polled_messages: int = 0
    errors: list[str] = field(default_factory=list)


class Workload:
    """Runs the producers, consumer groups and leader observer against ``target`` until
    ``stop()`` or the deadline given to ``start``."""

    def __init__(self, target: Target, recorder: Recorder, config: WorkloadConfig) -> None:
        self._target = target
        self._recorder = recorder
        self._config = config
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.stats = WorkloadStats()
        self._deadline_s = 0.0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, deadline_s: float) -> None:
        """Start every worker; they stop at ``deadline_s`` (monotonic) at the latest."""
        self._deadline_s = deadline_s
        workers: list[tuple[str, Callable[[str, int], None], int]] = [
            (f"producer-{i + 1}", self._produce, i) for i in range(self._config.producers)
        ]
        workers += [(f"consumer-g{i + 1}", self._consume, i) for i in range(self._config.groups)]
        workers.append(("observer", self._observe, 0))
        for name, body, index in workers:
            thread = threading.Thread(
                target=self._guard, args=(name, body, index), name=f"chaos-{name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Ask every worker to stop and wait (bounded) for them."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            self._note(f"workers still running after {timeout_s:.0f} s: {', '.join(alive)}")

    def _running(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self._deadline_s

    def _note(self, text: str) -> None:
        with self._lock:
            self.stats.errors.append(text)

    def _guard(self, name: str, body: Callable[[str, int], None], index: int) -> None:
        # A crashed worker must not end the run silently: its error is reported.
        try:
            body(name, index)
        except Exception as error:
            self._note(f"{name} crashed: {error!r}")

    # -- producers -------------------------------------------------------------------------

    def _produce(self, process: str, index: int) -> None:
        config = self._config
        with self._target.connect() as connection:
            producer = Producer(
                connection,
                idempotent=True,
                producer_id=f"chaos-{process}-{time.monotonic_ns()}",
                timeout_s=config.send_timeout_s,
                attempt_timeout_s=min(2.0, config.send_timeout_s),
            )
            try:
                for number in range(1, MAX_OPS_PER_WORKER + 1):
                    if not self._running():
                        break
                    self._send_one(producer, process, f"p{index + 1}-{number}", number)
                    self._stop.wait(config.send_interval_s)
            finally:
                producer.close(timeout_s=config.send_timeout_s)

    def _send_one(self, producer: Producer, process: str, value: str, number: int) -> None:
        topic = self._config.topic
        queue_id = number % self._config.queue_count
        invoked = SendValue(topic=topic, value=value, queue_id=queue_id)
        self._recorder.invoke(process, SEND, invoked)
        try:
            result = producer.send(topic, value.encode(), queue_id=queue_id)
        except _NOT_WRITTEN:
            self._recorder.complete(process, "fail", SEND, invoked)
            with self._lock:
                self.stats.sends_failed += 1
            return
        except Exception:  # unknown outcome, forgotten sequence, internal: may be stored
            self._recorder.complete(process, "info", SEND, invoked)
            with self._lock:
                self.stats.sends_unknown += 1
            return
        if not result.replicated:
            # Master-slave: stored on the master, not yet on its in-sync slaves. A failover
            # may take it back, so it is not an acknowledgement the checker may hold us to.
            self._recorder.complete(process, "info", SEND, invoked)
            with self._lock:
                self.stats.sends_unknown += 1
            return
        acknowledged = SendValue(
            topic=topic,
            value=value,
            queue_id=result.queue_id,
            queue_offset=result.queue_offset,
            physical_offset=result.physical_offset,
        )
        self._recorder.complete(process, "ok", SEND, acknowledged)
        with self._lock:
            self.stats.sends_ok += 1

    # -- consumers -------------------------------------------------------------------------

    def _open(self, connection: Connection, group: str, queue_id: int) -> Consumer:
        return Consumer(
            connection,
            group,
            self._config.topic,
            queue_ids=[queue_id],
            max_messages=64,
            timeout_s=5.0,
        )

    def _consume(self, process: str, index: int) -> None:
        # One connection per group: its consumers (and their reopened successors) share it.
        with self._target.connect() as connection:
            self._consume_on(connection, process, index)

    def _consume_on(self, connection: Connection, process: str, index: int) -> None:
        config = self._config
        group = f"chaos-g{index + 1}"
        rng = random.Random(config.seed * 1000 + index)
        consumers = {q: self._open(connection, group, q) for q in range(config.queue_count)}
        committed: dict[int, int] = {}
        last_commit_s = time.monotonic()
        try:
            for round_number in range(MAX_OPS_PER_WORKER):
                if not self._running():
                    break
                queue_id = round_number % config.queue_count
                self._poll_one(process, group, queue_id, consumers[queue_id])
                if time.monotonic() - last_commit_s < _COMMIT_INTERVAL_S:
                    continue
                last_commit_s = time.monotonic()
                for q in range(config.queue_count):
                    self._commit_one(process, group, q, consumers[q], committed)
                    if rng.random() < _REOPEN_PROBABILITY:
                        consumers[q].close()
                        consumers[q] = self._open(connection, group, q)
            # A last commit, so the groups' offsets reflect what they consumed.
            for q in range(config.queue_count):
                self._commit_one(process, group, q, consumers[q], committed)
        finally:
            for consumer in consumers.values():
                consumer.close()

    def _poll_one(self, process: str, group: str, queue_id: int, consumer: Consumer) -> None:
        topic = self._config.topic
        invoked = PollValue(group=group, topic=topic, queue_id=queue_id)
        self._recorder.invoke(process, POLL, invoked)
        try:
            messages = consumer.poll(_POLL_TIMEOUT_S)
        except (RaftlogError, ValueError):
            # A read changes nothing and its messages were not delivered: a definite failure.
            self._recorder.complete(process, "fail", POLL, invoked)
            self._stop.wait(0.1)
            return
        received = tuple((m.queue_offset, m.body.decode(errors="replace")) for m in messages)
        self._recorder.complete(
            process,
            "ok",
            POLL,
            PollValue(group=group, topic=topic, queue_id=queue_id, messages=received),
        )
        with self._lock:
            self.stats.polled_messages += len(received)

    def _commit_one(
        self,
        process: str,
        group: str,
        queue_id: int,
        consumer: Consumer,
        committed: dict[int, int],
    ) -> None:
        try:
            position = consumer.positions[queue_id]
        except (RaftlogError, ValueError):
            return  # the consumer never reached the cluster: nothing to commit
        if committed.get(queue_id) == position:
            return
        value = CommitValue(
            group=group, topic=self._config.topic, queue_id=queue_id, queue_offset=position
        )
        self._recorder.invoke(process, COMMIT_OFFSETS, value)
        try:
            consumer.commit()
        except _NOT_WRITTEN:
            self._recorder.complete(process, "fail", COMMIT_OFFSETS, value)
            return
        except Exception:
            self._recorder.complete(process, "info", COMMIT_OFFSETS, value)
            return
        committed[queue_id] = position
        self._recorder.complete(process, "ok", COMMIT_OFFSETS, value)

    # -- leader observer -------------------------------------------------------------------

    def _observe(self, process: str, _index: int) -> None:
        seen: set[tuple[str, int]] = set()
        for _ in range(MAX_OPS_PER_WORKER):
            if not self._running():
                break
            for node_id in self._target.node_ids():
                view = self._target.status(node_id)
                if view is None or view.role != "leader":
                    continue
                if (view.node_id, view.term) not in seen:
                    seen.add((view.node_id, view.term))
                    self._recorder.event(
                        process, LEADER_OBSERVED, LeaderValue(node_id=view.node_id, term=view.term)
                    )
            self._stop.wait(_OBSERVE_INTERVAL_S)


def observe_leaders_once(target: Target, recorder: Recorder, node_ids: Sequence[str]) -> None:
    """Record the leader claims of ``node_ids`` right now (used before and after a run)."""
    for node_id in node_ids:
        view = target.status(node_id)
        if view is not None and view.role == "leader":
            recorder.event(
                "observer", LEADER_OBSERVED, LeaderValue(node_id=view.node_id, term=view.term)
            )
