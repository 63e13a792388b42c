"""OrderlyDispatch: a push consumer's orderly delivery (RocketMQ's
ConsumeMessageOrderlyService): the messages of one queue reach the listener one at a time,
in queue order, while this member holds the queue's lock (docs/messaging.md "Ordered
messages").

Rules this module keeps:
- Per queue at most one listener call at a time, so a queue takes at most one pool thread
  and queues run side by side up to the pool's size. A queue gives its thread back after
  ``_SLICE_S`` of work (it is submitted again), so one busy queue never starves the others.
- A message is handed over only while ``usable(queue_id)`` says the lock may be used;
  otherwise the queue waits ``suspend_s`` and looks again (its messages stay pulled and
  uncommitted until the consumer holds the lock again or gives the queue up).
- A message the listener does not accept (SUSPEND_CURRENT_QUEUE_A_MOMENT, RECONSUME_LATER,
  an exception, anything else) is offered again after ``suspend_s``, never skipped, and the
  queue's later messages wait behind it; it is retried until it succeeds (as RocketMQ's
  orderly consumers do by default), so a message that can never succeed stops its queue:
  the consumer logs each refusal (rate-limited).
- ``revoke`` (the queue is given up): its waiting messages are dropped (uncommitted: the next
  owner reads them) and it waits, bounded, for the listener call in progress on the queue,
  so this member is done with the queue before the consumer commits and unlocks it.
- Thread-safe: the puller adds, resumes and revokes; pool threads drain.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from raftlog.client.messages import Message

# RocketMQ's suspendCurrentQueueTimeMillis.
DEFAULT_SUSPEND_S = 1.0
# A queue's drain hands its thread back after this long (RocketMQ's
# MAX_TIME_CONSUME_CONTINUOUSLY is 60 s; shorter keeps queues fair on small pools).
_SLICE_S = 1.0

# submit(task) -> False when the pool is shut down (the task will not run).
Submit = Callable[[Callable[[], None]], bool]
# consume(message, generation) -> True when the listener accepted it.
Consume = Callable[[Message, int], bool]


@dataclass
class _Queue:
    queue_id: int
    pending: deque[tuple[Message, int]] = field(default_factory=deque)
    running: bool = False  # a drain is submitted or running
    busy: bool = False  # the listener is running on one of its messages
    resume_at_s: float | None = None
    revoked: bool = False


class OrderlyDispatch:
    """Serial per-queue delivery over a shared pool (see the module docstring)."""

    def __init__(
        self,
        submit: Submit,
        consume: Consume,
        usable: Callable[[int], bool],
        suspend_s: float = DEFAULT_SUSPEND_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._submit = submit
        self._consume = consume
        self._usable = usable
        self._suspend_s = suspend_s
        self._clock = clock
        self._changed = threading.Condition()
        self._queues: dict[int, _Queue] = {}

    def add(self, message: Message, generation: int) -> None:
        """Queue ``message`` (pulled in order) behind its queue's earlier ones."""
        with self._changed:
            queue = self._queues.setdefault(message.queue_id, _Queue(message.queue_id))
            queue.pending.append((message, generation))
            start = not queue.running and queue.resume_at_s is None
            queue.running = queue.running or start
        if start:
            self._start(queue)

    def resume_due(self) -> None:
        """Offer again the queues whose suspension ended (the puller calls it often)."""
        now_s = self._clock()
        due: list[_Queue] = []
        with self._changed:
            for queue in self._queues.values():
                if queue.resume_at_s is not None and queue.resume_at_s <= now_s:
                    queue.resume_at_s, queue.running = None, True
                    due.append(queue)
        for queue in due:
            self._start(queue)

    def next_due_s(self) -> float | None:
        """When the next suspension ends (monotonic s), or None."""
        with self._changed:
            due = [q.resume_at_s for q in self._queues.values() if q.resume_at_s is not None]
        return min(due, default=None)

    def revoke(self, queue_ids: Iterable[int], timeout_s: float) -> bool:
        """Drop these queues' waiting messages and wait up to ``timeout_s`` for the listener
        calls in progress on them; False if one is still running then."""
        deadline_s = self._clock() + timeout_s
        with self._changed:
            queues = [(q, self._queues[q]) for q in queue_ids if q in self._queues]
            for _, queue in queues:
                queue.revoked = True
                queue.pending.clear()
                queue.resume_at_s = None
            done = self._changed.wait_for(
                lambda: not any(queue.busy for _, queue in queues),
                max(0.0, deadline_s - self._clock()),
            )
            for queue_id, queue in queues:
                if self._queues.get(queue_id) is queue:
                    del self._queues[queue_id]
        return done

    def _start(self, queue: _Queue) -> None:
        if not self._submit(lambda: self._drain(queue)):
            with self._changed:
                queue.running = False  # shutting down: the messages stay uncommitted

    def _drain(self, queue: _Queue) -> None:
        """Hand the queue's messages over one by one (on a pool thread). A revoked queue's
        drain stops; a queue read again later is a new ``_Queue`` with its own drain."""
        slice_ends_s = self._clock() + _SLICE_S
        while True:
            with self._changed:
                if queue.revoked or not queue.pending:
                    queue.running = False
                    return
                message, generation = queue.pending[0]
                if not self._usable(queue.queue_id):
                    self._suspend(queue)
                    return
                queue.busy = True
            try:
                accepted = self._consume(message, generation)
            finally:
                with self._changed:
                    queue.busy = False
                    self._changed.notify_all()
            with self._changed:
                if not accepted:
                    self._suspend(queue)
                    return
                if queue.pending and queue.pending[0][0] is message:
                    queue.pending.popleft()
            if self._clock() >= slice_ends_s:
                self._start(queue)  # give the thread back; carry on in a new task
                return

    def _suspend(self, queue: _Queue) -> None:
        """Offer the queue's first message again after ``suspend_s``. Call locked."""
        queue.running = False
        queue.resume_at_s = self._clock() + self._suspend_s
