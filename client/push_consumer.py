"""The push consumer: long polling on one thread, a listener callback on a bounded pool.

``PushConsumer(servers, group=, topic=, listener=)`` is RocketMQ's DefaultMQPushConsumer with
a concurrent listener, built on the pull ``Consumer``: one puller thread long-polls the
topic's queues and hands each message to ``listener(message)`` on a pool of
``consume_thread_count`` threads; the listener answers ``ConsumeResult.CONSUME_SUCCESS`` or
``ConsumeResult.RECONSUME_LATER``. Messages of one queue may be consumed concurrently and
finish out of order (use orderly consumption where order matters).

``orderly=True`` is RocketMQ's MessageListenerOrderly: one member holds a queue at a time
and its messages reach the listener one by one, in order (client/orderly_dispatch.py);
SUSPEND_CURRENT_QUEUE_A_MOMENT offers the same message again after ``suspend_s``.

Rules this module keeps:
- At-least-once: a queue's committed offset never passes a message still in the listener or
  waiting to be consumed again (client/inflight_offsets.py); offsets are committed every
  ``commit_interval_s`` and at shutdown, so a crash re-delivers at most what was pulled after
  the lowest unfinished message, and a slow message never lets a later commit skip it.
- Everything is bounded: the pool (``consume_thread_count`` threads); per queue, the window
  from its lowest unfinished message to its last pulled one (``max_in_flight_per_queue``:
  the queue is paused at that many, RocketMQ's pullThresholdForQueue /
  consumeConcurrentlyMaxSpan); across queues, the messages pulled and not finished
  (``max_pending_messages``, which bounds the pool's work queue too). Every wait is bounded
  (the puller wakes at least every ``_IDLE_WAIT_S``; ``shutdown`` by its timeout).
- RECONSUME_LATER, a listener exception (logged, rate-limited) and any other answer are one
  case: the message goes to ``Consumer.reconsume_later`` (the retry topic); when that send
  fails, it is consumed again locally after ``redelivery_delay_s`` and stays in flight
  meanwhile (RocketMQ's fallback when sendMessageBack fails), so it is never lost and never
  committed past. Messages read back from the retry topic are tracked and committed apart
  from the topic's own (their queue ids are the retry topic's).
- The pull Consumer is used by the puller thread only (it is not thread-safe), commits
  included; listener threads touch only the tracker, ``reconsume_later`` and
  ``may_consume``.
- A queue the rebalance takes away (client/queue_handover.py) is committed up to its lowest
  unfinished message, then forgotten: its messages not yet started are skipped (the next
  owner reads them), running ones finish without effect. Orderly, the rebalance first waits
  for the listener call running on the queue, so two members never overlap.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures

from raftlog.client.connection import Connection
from raftlog.client.consumer import Consumer
from raftlog.client.errors import RaftlogError
from raftlog.client.inflight_offsets import InFlightOffsets
from raftlog.client.listener_calls import ConsumeResult, Listener, ListenerCalls
from raftlog.client.messages import Message
from raftlog.client.orderly_dispatch import DEFAULT_SUSPEND_S, OrderlyDispatch
from raftlog.client.rate_limited_log import RateLimitedLog
from raftlog.client.rebalance import DEFAULT_HEARTBEAT_INTERVAL_S
from raftlog.client.tag_filter import ALL_TAGS

_log = logging.getLogger(__name__)
__all__ = ["ConsumeResult", "Listener", "PushConsumer"]

# RocketMQ's consumeThreadMin/Max is 20. A Python listener holds the GIL while it computes,
# so more threads than ~4 per core only add contention; I/O-bound listeners still get 20 on
# machines with 5 cores or more.
DEFAULT_CONSUME_THREAD_COUNT = min(20, 4 * (os.cpu_count() or 1))
# RocketMQ's pullBatchSize, pullThresholdForQueue and persistConsumerOffsetInterval (5 s).
DEFAULT_PULL_BATCH_SIZE = 32
DEFAULT_MAX_IN_FLIGHT_PER_QUEUE = 1000
DEFAULT_MAX_PENDING_MESSAGES = 2000
DEFAULT_COMMIT_INTERVAL_S = 5.0
# RocketMQ consumes a message again after 5 s when it cannot send it back to the broker.
DEFAULT_REDELIVERY_DELAY_S = 5.0
# The puller's longest wait: a poll, or a wait for room; bounds how late a commit, a
# redelivery or a shutdown is noticed.
_IDLE_WAIT_S = 0.5
# After a failed pull or commit, wait before the next try (the cluster is away).
_ERROR_BACKOFF_S = 1.0
# How long a rebalance waits for an orderly listener still running on a queue given up.
_REVOKE_WAIT_S = 10.0


class PushConsumer:
    """Calls ``listener`` for every message of ``topic`` for consumer ``group`` (see the
    module docstring). ``start()`` begins, ``shutdown()`` stops and commits; as a context
    manager it starts on entry and shuts down on exit.

    ``tags``, ``broadcast``, ``client_id``, ``offsets_dir``, ``from_beginning``,
    ``timeout_s``, ``orderly``, ``allocation`` and ``heartbeat_interval_s`` are the pull
    Consumer's (a malformed tag expression raises ValueError here); ``suspend_s`` is how
    long an orderly queue pauses after SUSPEND_CURRENT_QUEUE_A_MOMENT (RocketMQ's
    suspendCurrentQueueTimeMillis, 1 s). ``servers``: addresses, or a Connection to share
    (not closed at shutdown).
    """

    def __init__(
        self,
        servers: str | Sequence[str] | Connection,
        *,
        group: str,
        topic: str,
        listener: Listener,
        tags: str | Sequence[str] = ALL_TAGS,
        broadcast: bool = False,
        client_id: str | None = None,
        offsets_dir: str | os.PathLike[str] | None = None,
        from_beginning: bool = False,
        consume_thread_count: int = DEFAULT_CONSUME_THREAD_COUNT,
        pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE,
        max_in_flight_per_queue: int = DEFAULT_MAX_IN_FLIGHT_PER_QUEUE,
        max_pending_messages: int = DEFAULT_MAX_PENDING_MESSAGES,
        commit_interval_s: float = DEFAULT_COMMIT_INTERVAL_S,
        redelivery_delay_s: float = DEFAULT_REDELIVERY_DELAY_S,
        timeout_s: float = 30.0,
        orderly: bool = False,
        suspend_s: float = DEFAULT_SUSPEND_S,
        allocation: str = "average",
        heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S,
    ) -> None:
        if not callable(listener):
            raise TypeError("listener must be callable: listener(message) -> ConsumeResult")
        _require_at_least(1, consume_thread_count=consume_thread_count)
        _require_at_least(1, pull_batch_size=pull_batch_size)
        _require_at_least(pull_batch_size, max_in_flight_per_queue=max_in_flight_per_queue)
        _require_at_least(pull_batch_size, max_pending_messages=max_pending_messages)
        if commit_interval_s <= 0 or redelivery_delay_s < 0 or suspend_s < 0:
            raise ValueError("commit_interval_s must be > 0; redelivery_delay_s, suspend_s >= 0")
        self.listener = listener
        self.consume_thread_count = consume_thread_count
        self._pull_batch_size = pull_batch_size
        self._max_in_flight_per_queue = max_in_flight_per_queue
        self._max_pending_messages = max_pending_messages
        self._commit_interval_s = commit_interval_s
        self._redelivery_delay_s = redelivery_delay_s
        self.consumer = Consumer(
            servers,
            group,
            topic,
            tags=tags,
            from_beginning=from_beginning,
            max_messages=pull_batch_size,
            timeout_s=timeout_s,
            broadcast=broadcast,
            client_id=client_id,
            offsets_dir=offsets_dir,
            orderly=orderly,
            allocation=allocation,
            heartbeat_interval_s=heartbeat_interval_s,
        )
        self.consumer.set_revoke_listener(self._revoked)
        self._orderly = self._orderly_dispatch(suspend_s) if orderly else None
        self._tracker = InFlightOffsets()
        self._retry_tracker = InFlightOffsets()  # retried messages: the retry topic's queues
        self._stopping = threading.Event()
        self._state_lock = threading.Lock()
        self._puller: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._futures: set[Future[None]] = set()
        # (due monotonic s, tie-break, message, generation): consumed again locally.
        self._redeliveries: list[tuple[float, int, Message, int]] = []
        self._redelivery_order = itertools.count()
        self._shut_down = False
        self._calls = ListenerCalls(listener, group)
        self._pull_failures = RateLimitedLog(_log)
        self._commit_failures = RateLimitedLog(_log)

    def _orderly_dispatch(self, suspend_s: float) -> OrderlyDispatch:
        return OrderlyDispatch(
            self._submit_task, self._consume_orderly, self.consumer.may_consume, suspend_s
        )

    @property
    def group(self) -> str:
        return self.consumer.group

    @property
    def topic(self) -> str:
        return self.consumer.topic

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> PushConsumer:
        """Resolve the queues and the committed offsets (errors such as an unknown topic
        raise here), then start pulling. Once only."""
        with self._state_lock:
            if self._puller is not None or self._shut_down:
                raise RuntimeError("a PushConsumer starts once (create a new one to restart)")
            try:
                _ = self.consumer.positions  # the queues and offsets now, on this thread
            except BaseException:
                self._shut_down = True  # the with-block's __exit__ will not run: close here
                self.consumer.close()
                raise
            self._pool = ThreadPoolExecutor(
                max_workers=self.consume_thread_count, thread_name_prefix="raftlog-push-listener"
            )
            self._puller = threading.Thread(
                target=self._run, name=f"raftlog-push-puller-{self.group}", daemon=True
            )
            self._puller.start()
        return self

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop pulling, let the listener finish the messages it is running (up to
        ``timeout_s``; queued ones are dropped and stay uncommitted, so they come again),
        commit what is done, and close. Idempotent."""
        deadline_s = time.monotonic() + max(0.0, timeout_s)
        with self._state_lock:
            if self._shut_down:
                return
            self._shut_down = True
        self._stopping.set()
        if self._puller is not None:
            self._puller.join(max(0.0, deadline_s - time.monotonic()))
            if self._puller.is_alive():
                _log.warning("push consumer %s: the puller did not stop in time", self.group)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            with self._state_lock:
                running = list(self._futures)
            wait_futures(running, timeout=max(0.0, deadline_s - time.monotonic()))
        # A puller still in an RPC owns the Consumer: no commit beside it (the last periodic
        # commit stands; what followed comes again: at-least-once).
        if self._puller is not None and not self._puller.is_alive():
            self._commit()
        self.consumer.close()

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # -- the puller thread -----------------------------------------------------------------

    def _run(self) -> None:
        next_commit_s = time.monotonic() + self._commit_interval_s
        while not self._stopping.is_set():
            self._redeliver_due()
            if time.monotonic() >= next_commit_s:
                self._commit()
                next_commit_s = time.monotonic() + self._commit_interval_s
            if not self._room_to_pull():
                self._tracker.wait_for_change(_IDLE_WAIT_S)
                continue
            try:
                messages = self.consumer.poll(self._poll_timeout_s())
            except RaftlogError as error:
                self._pull_failures.warning("push consumer %s: pull failed: %s", self.group, error)
                self._stopping.wait(_ERROR_BACKOFF_S)
                continue
            for message in messages:
                tracker = self._tracker_of(message)
                generation = tracker.start(message.queue_id, message.queue_offset)
                if self._orderly is not None:
                    self._orderly.add(message, generation)
                else:
                    self._submit(message, generation)

    def _room_to_pull(self) -> bool:
        """Pause the queues whose window is full; False when nothing may be pulled now."""
        in_flight = self._tracker.in_flight() + self._retry_tracker.in_flight()
        if in_flight + self._pull_batch_size > self._max_pending_messages:
            return False
        queue_ids = list(self.consumer.positions)
        limit = self._max_in_flight_per_queue - self._pull_batch_size
        full = [q for q in queue_ids if self._tracker.window(q) > limit]
        self.consumer.resume(q for q in queue_ids if q not in full)
        self.consumer.pause(full)
        # No queue yet (the rebalance gives them, inside poll): poll, which waits.
        return not queue_ids or len(full) < len(queue_ids)

    def _poll_timeout_s(self) -> float:
        """Up to _IDLE_WAIT_S, less when a redelivery falls due sooner."""
        with self._state_lock:
            due_s = self._redeliveries[0][0] if self._redeliveries else None
        if self._orderly is not None:
            due_s = min(
                (d for d in (due_s, self._orderly.next_due_s()) if d is not None), default=None
            )
        if due_s is None:
            return _IDLE_WAIT_S
        return max(0.0, min(_IDLE_WAIT_S, due_s - time.monotonic()))

    def _redeliver_due(self) -> None:
        if self._orderly is not None:
            self._orderly.resume_due()
        now_s = time.monotonic()
        due: list[tuple[Message, int]] = []
        with self._state_lock:
            while self._redeliveries and self._redeliveries[0][0] <= now_s:
                _, _, message, generation = heapq.heappop(self._redeliveries)
                due.append((message, generation))
        for message, generation in due:
            self._submit(message, generation)

    def _submit(self, message: Message, generation: int) -> None:
        self._submit_task(lambda: self._consume(message, generation))

    def _submit_task(self, task: Callable[[], None]) -> bool:
        """Run ``task`` on the pool; False when it is shut down (the task's messages stay in
        flight, uncommitted)."""
        assert self._pool is not None
        try:
            future = self._pool.submit(task)
        except RuntimeError:
            return False
        with self._state_lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)
        return True

    def _revoked(self, queue_ids: list[int], positions: dict[int, int]) -> dict[int, int]:
        """The rebalance takes these queues away (on the puller thread): stop consuming
        them and answer how far they are done (see the module docstring)."""
        if self._orderly is not None and not self._orderly.revoke(queue_ids, _REVOKE_WAIT_S):
            _log.warning(
                "push consumer %s: the listener is still running on queue(s) %s given up",
                self.group,
                queue_ids,
            )
        offsets = self._tracker.committable(positions)
        self._tracker.forget(queue_ids)
        return offsets

    def _forget(self, future: Future[None]) -> None:
        with self._state_lock:
            self._futures.discard(future)

    def _commit(self) -> None:
        """Commit, per queue, up to the lowest message not yet done (failures are retried at
        the next interval: committing again is harmless)."""
        try:
            self.consumer.commit(self._tracker.committable(self.consumer.positions))
            retried = self._retry_tracker.committable(self.consumer.retry_positions)
            if retried:
                self.consumer.commit_retry(retried)
        except RaftlogError as error:
            self._commit_failures.warning(
                "push consumer %s: commit failed (retried later): %s", self.group, error
            )

    # -- listener threads ------------------------------------------------------------------

    def _consume(self, message: Message, generation: int) -> None:
        tracker = self._tracker_of(message)
        if not tracker.current(message.queue_id, generation):
            return  # its queue was given up before it ran: the next owner consumes it
        if self._calls.concurrently(message):
            tracker.finish(message.queue_id, message.queue_offset, generation)
        else:
            self._reconsume(message, generation)

    def _tracker_of(self, message: Message) -> InFlightOffsets:
        return self._retry_tracker if message.pulled_topic else self._tracker

    def _consume_orderly(self, message: Message, generation: int) -> bool:
        """Orderly: True when the listener accepted the message (the next one may go)."""
        if not self._tracker.current(message.queue_id, generation):
            return True  # its queue was given up: nothing to do
        if self._stopping.is_set():
            return False  # shutting down: the queue waits (uncommitted) instead of going on
        if not self._calls.orderly(message):
            return False
        self._tracker.finish(message.queue_id, message.queue_offset, generation)
        return True

    def _reconsume(self, message: Message, generation: int) -> None:
        """Hand the message to the retry topic, or consume it again here later."""
        try:
            self.consumer.reconsume_later(message)
        except Exception as error:  # any failure: the message stays here, in flight
            self._calls.failures.warning(
                "push consumer %s: reconsume_later failed (%s); consumed again locally",
                self.group,
                error,
            )
        else:
            self._tracker_of(message).finish(message.queue_id, message.queue_offset, generation)
            return
        due_s = time.monotonic() + self._redelivery_delay_s
        entry = (due_s, next(self._redelivery_order), message, generation)
        with self._state_lock:
            heapq.heappush(self._redeliveries, entry)


def _require_at_least(minimum: int, **values: int) -> None:
    for name, value in values.items():
        if value < minimum:
            raise ValueError(f"{name} is {value}; it must be at least {minimum}")
