"""The producer: sends messages to the leader, optionally idempotent, in order.

Rules this module keeps:
- Batches are sent in the order they were submitted. An idempotent producer keeps up to
  ``max_in_flight_requests`` requests in flight (client/send_window.py), numbered in that
  order; the node stores a producer's numbers strictly in order (holding one that overtook
  its predecessor briefly), so order holds with several in flight. The first request after
  a quiet spell (no answer for ``PIPELINE_AFTER_ANSWER_S``) goes alone: a node takes any
  number as the first of a producer it does not know. A non-idempotent producer sends one
  request at a time. ``send_async`` queues to one sender thread. A synchronous
  ``send``/``send_batch`` with nothing queued or in flight sends from the caller's thread
  instead (under the same send lock, so the order holds): two thread hand-offs fewer.
- Idempotent producer (the default): a batch gets the next sequence number when it is first
  sent, and keeps it across every retry (same producer_id + sequence), so retrying an unknown
  outcome stores it at most once. A batch refused with "nothing written" gives its number
  back. A batch whose outcome stayed unknown after all retries is reported to its caller as
  UnknownOutcomeError, and it is resent (same sequence) before any later batch, so it ends up
  stored exactly once and later batches never leave a gap; while it cannot be resolved, later
  batches fail with UnavailableError without being sent.
- A failed request in the window ends it (``_recover``): every later answer is awaited and
  the window is settled in order. What may be stored is resent with its number (answered as
  a duplicate if it was); from the first request known not stored on, the rest are sent
  anew with new numbers, never reusing an old one.
- A non-idempotent producer (``idempotent=False``) never retries an unknown outcome: it is
  surfaced as UnknownOutcomeError (the batch may be stored once, or not at all).
- Each message without a ``uniq_key`` gets a fresh unique key, so it can be found by key.
- Pending batches (queued or in flight) are bounded (``max_pending_batches``);
  ``send_async`` blocks up to ``timeout_s`` for room, then raises ResourceExhaustedError.
- Transactional sends (``send_in_transaction``, client/transaction.py) go through the same
  ordered, idempotent path as a batch of one, never coalesced with another.
- Batches of one topic queued behind each other are coalesced into one request (at most
  ``MAX_COALESCED_MESSAGES`` messages / ``MAX_COALESCED_BYTES``), in order: many
  ``send_async`` calls cost one round trip and one Raft entry. A coalesced request is atomic;
  if it is refused for its content, its members are resent one by one.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from raftlog.client.connection import Connection
from raftlog.client.errors import (
    InvalidArgumentError,
    NotFoundError,
    RaftlogError,
    ResourceExhaustedError,
    SequenceForgottenError,
    SequenceGapError,
    UnavailableError,
    UnknownOutcomeError,
)
from raftlog.client.messages import Message, OutgoingMessage, SendResult
from raftlog.client.outgoing_batch import Batch, delay_fields, message_of, one_message
from raftlog.client.positional_constructor import positional_constructor
from raftlog.client.retry import RetryPolicy
from raftlog.client.send_window import InFlight, SendWindow
from raftlog.client.submit_queue import SubmitQueue
from raftlog.client.transaction import (
    DEFAULT_PRODUCER_GROUP,
    CheckStream,
    TransactionEnds,
    TransactionSendResult,
    TransactionState,
    finish,
    local_message,
)
from raftlog.proto import client_pb2

MAX_PRODUCER_ID_BYTES = 64
DEFAULT_MAX_PENDING_BATCHES = 1024
# Sends queued behind each other are coalesced into one request up to these bounds.
MAX_COALESCED_MESSAGES = 512
MAX_COALESCED_BYTES = 1 << 20
# Requests in flight at once (Kafka's max.in.flight.requests.per.connection, default 5). At
# most 8: a node remembers the outcomes of a producer's last 8 batches, which a window resent
# after a failure may ask for, and waits for at most 7 ahead of the next expected one.
DEFAULT_MAX_IN_FLIGHT_REQUESTS = 5
MAX_IN_FLIGHT_REQUESTS = 8
# A request joins others in flight only if some answer came within this long (far below the
# nodes' 15-minute producer retention, after which a producer is unknown to them).
PIPELINE_AFTER_ANSWER_S = 10.0
# SendResult(...) without the frozen __init__'s per-field cost (positional_constructor.py).
_new_send_result = positional_constructor(SendResult)
# The API's SendStatus -> RocketMQ's names (SendResult.send_status).
_SEND_STATUS_NAMES = {
    client_pb2.SEND_STATUS_OK: "SEND_OK",
    client_pb2.SEND_STATUS_FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    client_pb2.SEND_STATUS_SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}


def _request_of(members: list[Batch]) -> Batch:
    """The request for queued batches of one topic: the one batch, or them coalesced."""
    if len(members) == 1:
        return members[0]
    return Batch(
        topic=members[0].topic,
        messages=[m for member in members for m in member.messages],
        future=Future(),
        uniq_keys=[k for member in members for k in member.uniq_keys],
        delay=members[0].delay,
        size_bytes=sum(member.size_bytes for member in members),
    )


def _settle(members: list[Batch], results: list[SendResult]) -> None:
    """Hand each member its share of a request's results, in order."""
    start = 0
    for member in members:
        member.settle(results[start : start + len(member.messages)])
        start += len(member.messages)


def _fail(members: list[Batch], error: RaftlogError) -> None:
    for member in members:
        member.future.set_exception(error)


class Producer:
    """Sends messages to a raftlog cluster.

    ``addresses``: the members ("host:port", a list or a comma-separated string; any subset
    reaches the leader through redirects). ``idempotent``: see the module rules.
    ``producer_id``: the idempotent producer's id (default: a fresh UUID); when you pass an id
    you reuse across process restarts, also pass ``first_sequence`` one past the last
    sequence that id ever sent, or new batches are taken for resends. ``timeout_s``: the
    total time one batch may take, retries included. ``max_in_flight_requests``: requests
    sent before the first is answered (1 to 8; an idempotent producer only: a
    non-idempotent one sends one at a time, as only sequences keep several in order).

    Transactions (``send_in_transaction``; docs/messaging.md): ``group`` is the producer
    group (default ``DEFAULT_PRODUCER``: give each application its own); with a
    ``transaction_checker`` the producer keeps a check-back stream to the leader and answers
    the group's undecided transactions of ``transaction_topics`` and of every topic it sent
    a transaction to.
    """

    def __init__(
        self,
        addresses: str | Sequence[str] | Connection,
        *,
        idempotent: bool = True,
        producer_id: str | None = None,
        first_sequence: int = 1,
        timeout_s: float = 30.0,
        attempt_timeout_s: float = 10.0,
        max_attempts: int = 10,
        max_pending_batches: int = DEFAULT_MAX_PENDING_BATCHES,
        max_in_flight_requests: int = DEFAULT_MAX_IN_FLIGHT_REQUESTS,
        group: str = DEFAULT_PRODUCER_GROUP,
        transaction_checker: Callable[[Message], TransactionState] | None = None,
        transaction_topics: Sequence[str] = (),
    ) -> None:
        if producer_id is not None and not idempotent:
            raise ValueError("producer_id is only meaningful for an idempotent producer")
        self.producer_id = (producer_id or str(uuid.uuid4())) if idempotent else ""
        if len(self.producer_id.encode()) > MAX_PRODUCER_ID_BYTES:
            raise ValueError(f"producer_id is over {MAX_PRODUCER_ID_BYTES} bytes")
        if first_sequence < 1:
            raise ValueError(f"first_sequence is {first_sequence}; it must be at least 1")
        if not 1 <= max_in_flight_requests <= MAX_IN_FLIGHT_REQUESTS:
            raise ValueError(
                f"max_in_flight_requests is {max_in_flight_requests}; it must be 1 to "
                f"{MAX_IN_FLIGHT_REQUESTS}"
            )
        self.idempotent = idempotent
        self.timeout_s = timeout_s
        self._owns_connection = not isinstance(addresses, Connection)
        self._connection = addresses if isinstance(addresses, Connection) else Connection(addresses)
        self._policy = RetryPolicy(
            max_attempts=max_attempts,
            total_timeout_s=timeout_s,
            attempt_timeout_s=min(attempt_timeout_s, timeout_s),
        )
        self._next_sequence = first_sequence
        # Batches whose outcome is unknown, in sequence order: resent before anything new.
        self._unresolved: list[Batch] = []
        # Batches put by callers (None: close), and those the sender took but has not sent.
        self._queue: SubmitQueue[Batch | None] = SubmitQueue(max_pending_batches)
        self._taken: collections.deque[Batch | None] = collections.deque()
        self._submit_lock = threading.Lock()
        # Held while a batch is being sent (by the sender thread or a direct ``send``).
        self._send_lock = threading.Lock()
        self._closed = False
        # When the last Produce answer came (monotonic s): see ``_settle_first``.
        self._answered_at_s = float("-inf")
        self._window = SendWindow(
            lambda batch: self._attempt(batch, idempotent=idempotent),
            max_in_flight_requests if idempotent else 1,
            f"raftlog-produce-{self.producer_id[:8]}",
            self._queue.wake,
        )
        self._sender = threading.Thread(
            target=self._run, name=f"raftlog-producer-{self.producer_id[:8]}", daemon=True
        )
        self._sender.start()
        self.group = group
        self._ends = TransactionEnds(self._connection, group, self._policy)
        self._check_stream: CheckStream | None = None
        if transaction_checker is not None:
            self._check_stream = CheckStream(
                self._connection, group, transaction_checker, self._ends, transaction_topics
            )

    @property
    def connection(self) -> Connection:
        """The connection this producer sends through."""
        return self._connection

    @property
    def next_sequence(self) -> int:
        """The sequence the next new batch will get (idempotent producer)."""
        return self._next_sequence

    # -- submitting ------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        body: bytes,
        *,
        key: str | None = None,
        keys: Sequence[str] = (),
        tags: str = "",
        queue_id: int | None = None,
        sharding_key: str | None = None,
        properties: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        uniq_key: str = "",
        delay_level: int = 0,
        deliver_at_ms: int = 0,
    ) -> SendResult:
        """Send one message and wait for it to be stored. Raises a RaftlogError subclass;
        UnknownOutcomeError means it may or may not be stored (never "failed").

        A delay message (docs/messaging.md): ``delay_level`` N delivers it to ``topic`` after
        the node's N-th delay level (1s 5s 10s 30s 1m ... 2h by default); ``deliver_at_ms``
        at that time (ms since the epoch, at most the node's timer_max_delay_ms ahead). The
        result then names its place in the schedule topic (SCHEDULE_TOPIC_XXXX)."""
        fields = (key, keys, tags, queue_id, sharding_key, properties, uniq_key)
        batch = one_message(topic, body, *fields, delay=delay_fields(delay_level, deliver_at_ms))
        results: list[SendResult] = self._send_batch_now(batch)
        return results[0]

    def send_batch(
        self, topic: str, messages: Sequence[OutgoingMessage | bytes]
    ) -> list[SendResult]:
        """Send a batch (stored atomically: all or none) and wait; results in order."""
        return self._send_batch_now(Batch.of(topic, [message_of(m) for m in messages]))

    def send_in_transaction(
        self,
        topic: str,
        body: bytes,
        *,
        local_transaction: Callable[[Message], TransactionState],
        key: str | None = None,
        keys: Sequence[str] = (),
        tags: str = "",
        queue_id: int | None = None,
        sharding_key: str | None = None,
        properties: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        uniq_key: str = "",
    ) -> TransactionSendResult:
        """Send one message in a transaction (client/transaction.py): stored as a half
        message, invisible to consumers; then ``local_transaction(message)`` runs here and
        its TransactionState ends the transaction (UNKNOWN leaves it to the check-back).
        Raises a RaftlogError only when the half was not stored (UnknownOutcomeError: it may
        be; the local transaction did not run)."""
        if self._check_stream is not None:
            self._check_stream.add_topic(topic)
        fields = (key, keys, tags, queue_id, sharding_key, properties, uniq_key)
        batch = one_message(topic, body, *fields)
        batch.transaction_group = self.group
        half = self._send_batch_now(batch)[0]
        message = local_message(topic, batch.messages[0], half)
        return finish(self._ends, message, half, local_transaction)

    def _send_batch_now(self, batch: Batch) -> list[SendResult]:
        """Send from this thread when nothing is queued or being sent (the order then holds
        trivially); otherwise queue behind the others and wait."""
        with self._submit_lock:
            if self._closed:
                raise RaftlogError("the producer is closed")
            direct = self._queue.unfinished() == 0 and self._send_lock.acquire(blocking=False)
            if not direct:
                self._enqueue(batch)
        if direct:
            try:
                batch.future.set_running_or_notify_cancel()
                self._send_group([batch])
            finally:
                self._send_lock.release()
        results: list[SendResult] = batch.future.result()
        return results

    def send_async(
        self,
        topic: str,
        body: bytes,
        *,
        key: str | None = None,
        keys: Sequence[str] = (),
        tags: str = "",
        queue_id: int | None = None,
        sharding_key: str | None = None,
        properties: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        uniq_key: str = "",
        delay_level: int = 0,
        deliver_at_ms: int = 0,
    ) -> Future[SendResult]:
        """Queue one message; the future holds its SendResult or RaftlogError. Messages of
        one producer are stored in the order they were queued. ``delay_level`` and
        ``deliver_at_ms``: as ``send``."""
        fields = (key, keys, tags, queue_id, sharding_key, properties, uniq_key)
        batch = one_message(
            topic, body, *fields, single=True, delay=delay_fields(delay_level, deliver_at_ms)
        )
        with self._submit_lock:
            if self._closed:
                raise RaftlogError("the producer is closed")
            self._enqueue(batch)
        future: Future[SendResult] = batch.future
        return future

    def send_batch_async(
        self, topic: str, messages: Sequence[OutgoingMessage | bytes]
    ) -> Future[list[SendResult]]:
        """Queue a batch; the future holds the results in order, or a RaftlogError."""
        batch = Batch.of(topic, [message_of(m) for m in messages])
        with self._submit_lock:
            if self._closed:
                raise RaftlogError("the producer is closed")
            self._enqueue(batch)
        return batch.future

    def _enqueue(self, batch: Batch) -> None:
        """Queue ``batch`` for the sender thread (the caller holds ``_submit_lock``)."""
        try:
            self._queue.put(batch, timeout_s=self.timeout_s)
        except queue.Full:
            raise ResourceExhaustedError(
                f"{self._queue.max_unfinished} batches are already pending; none freed within "
                f"{self.timeout_s:.1f} s"
            ) from None

    # -- the sender thread -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            if self._window and self._settle_first():
                with self._send_lock:
                    self._queue.finished(self._settle_oldest())
                continue
            if not self._taken:
                # Returns empty when an answer arrived first (the window's wake).
                self._taken.extend(self._queue.take_all())
                if not self._taken:
                    continue
            batch = self._taken.popleft()
            if batch is None:
                break
            with self._send_lock:
                self._queue.finished(self._process(batch))
        # Closing: every answer in, then one last bounded try to settle unknown outcomes, so
        # each is stored once.
        with self._send_lock:
            self._queue.finished(self._settle_all())
            self._resolve()
        self._window.close()

    def _settle_first(self) -> bool:
        """Whether the oldest answer must be taken (waiting for it if need be) before
        anything more is sent: the window is full, or the answer is in, or no answer came
        for a while (then the node may have forgotten this producer, and a later batch
        reaching it first would be taken as the first of an unknown producer: the first
        request after a quiet spell goes alone)."""
        if self._window.full() or self._window.oldest_answered():
            return True
        return time.monotonic() - self._answered_at_s > PIPELINE_AFTER_ANSWER_S

    def _process(self, batch: Batch) -> int:
        """Send ``batch`` (and what coalesces with it); returns how many queued items are
        finished now (those in the window finish when their answer is taken)"""
        if not batch.future.set_running_or_notify_cancel():
            return 1  # cancelled before it was sent: nothing to do, no sequence used
        if not batch.messages:
            finished = self._settle_all()
            batch.future.set_result([])  # a flush marker: everything before it is done
            return finished + 1
        joined, skipped = self._coalesce(batch)
        members = [batch, *joined]
        queue_items = len(members) + skipped
        request = _request_of(members)
        try:
            self._number(request)
        except UnavailableError as error:
            _fail(members, error)
            return queue_items
        self._window.send(request, members, queue_items)
        return 0

    def _coalesce(self, first: Batch) -> tuple[list[Batch], int]:
        """Batches queued right behind ``first`` for the same topic, to go in the same
        request (a producer calling ``send_async`` in a loop gets Kafka-style batching for
        free: one Raft entry and one round trip for many sends). Order is kept: the first
        batch that cannot join stays first in ``_taken`` for the next request. Returns the joined
        batches and how many cancelled ones were skipped."""
        joined: list[Batch] = []
        skipped = 0
        message_count = len(first.messages)
        size_bytes = first.size_bytes
        while message_count < MAX_COALESCED_MESSAGES and size_bytes < MAX_COALESCED_BYTES:
            if not self._taken:
                self._taken.extend(self._queue.take_all(block=False))
                if not self._taken:
                    break
            candidate = self._taken[0]
            if (
                candidate is None
                or not candidate.messages
                or candidate.topic != first.topic
                or candidate.delay != first.delay
                or candidate.transaction_group
                or first.transaction_group
                or message_count + len(candidate.messages) > MAX_COALESCED_MESSAGES
            ):
                break
            self._taken.popleft()
            if not candidate.future.set_running_or_notify_cancel():
                skipped += 1
                continue
            joined.append(candidate)
            message_count += len(candidate.messages)
            size_bytes += candidate.size_bytes
        return joined, skipped

    # -- answers, in order ---------------------------------------------------------------

    def _settle_oldest(self) -> int:
        """Take the oldest answer; returns the queue items finished. A failed request ends
        the window: every later answer is awaited and everything is settled in order."""
        entry = self._window.oldest()
        if entry.error is None:
            _settle(entry.members, entry.results)
            return entry.queue_items
        entries = [entry, *self._window.drain()]
        if self.idempotent:
            self._recover(entries)
        else:
            self._refused(entry, entry.error)  # a window of one: nothing after it
        return sum(e.queue_items for e in entries)

    def _settle_all(self) -> int:
        finished = 0
        while self._window:
            finished += self._settle_oldest()
        return finished

    def _recover(self, entries: list[InFlight]) -> None:
        """Settle a window whose oldest request failed. The node stores a producer's
        sequences in order, so: a request answered as stored means every earlier one is
        stored; a request whose outcome is unknown may be stored under its number (it is
        resent with it, and the node answers a duplicate from its first copy); and from the
        first request known not stored on, none is, so those are sent again as new
        batches with new numbers (never one of the old numbers: another batch may hold it)."""
        last_stored = max((i for i, e in enumerate(entries) if e.error is None), default=-1)
        self._next_sequence = entries[0].request.sequence
        for i, entry in enumerate(entries):
            error = entry.error
            if error is None:
                self._next_sequence = entry.request.sequence + 1
                _settle(entry.members, entry.results)
                continue
            if (i < last_stored or isinstance(error, UnknownOutcomeError)) and self._resend(
                entry, error
            ):
                continue
            self._next_sequence = entry.request.sequence
            for rest in entries[i:]:
                later_error = rest.error
                if later_error is None:  # cannot happen (numbers are stored in order)
                    _settle(rest.members, rest.results)
                else:
                    self._refused(rest, later_error)
            return

    def _resend(self, entry: InFlight, error: RaftlogError) -> bool:
        """Resend a request that may be stored, with its number; False when it turns out
        not stored (it, and everything after it, is then sent anew)."""
        self._next_sequence = entry.request.sequence + 1
        if self._unresolved:
            # An earlier one of this window could not be resent just now: queue behind it
            # (one bounded wait per window, not one per request; the next send tries again).
            self._unresolved.append(entry.request)
            _fail(entry.members, error)
            return True
        try:
            results = self._attempt(entry.request, idempotent=True)
        except (SequenceGapError, InvalidArgumentError, NotFoundError):
            return False
        except SequenceForgottenError as forgotten:
            _fail(entry.members, forgotten)  # stored exactly once
        except RaftlogError as failure:
            self._unresolved.append(entry.request)
            _fail(entry.members, failure)
        else:
            _settle(entry.members, results)
        return True

    def _refused(self, entry: InFlight, error: RaftlogError) -> None:
        """A request known not stored: a gap or an unknown outcome behind an unstored one,
        or a refusal of its content, is sent again on this thread as new batches (a refused
        coalesced request member by member, so only a bad member fails); any other refusal
        (no leader within the timeout, a full disk) is its answer."""
        if self.idempotent and isinstance(error, SequenceGapError | UnknownOutcomeError):
            self._send_group(entry.members)
        elif isinstance(error, InvalidArgumentError | NotFoundError) and len(entry.members) > 1:
            for member in entry.members:
                self._send_group([member])
        else:
            _fail(entry.members, error)

    def _send_group(self, members: list[Batch]) -> None:
        """Send ``members`` as one new request from this thread and settle them."""
        try:
            _settle(members, self._deliver(_request_of(members)))
        except RaftlogError as error:
            _fail(members, error)
        except Exception as error:  # a bug must fail the futures, not kill the thread
            _fail(members, RaftlogError(f"internal client error: {error!r}"))

    def _deliver(self, batch: Batch) -> list[SendResult]:
        """Send a new batch (idempotent: after settling any unresolved one)."""
        if not self.idempotent:
            return self._attempt(batch, idempotent=False)
        self._number(batch)
        try:
            return self._attempt(batch, idempotent=True)
        except UnknownOutcomeError:
            self._unresolved.append(batch)
            raise
        except SequenceForgottenError:
            raise  # stored exactly once: the sequence is used
        except RaftlogError:
            # Refused with nothing written (a gap without an earlier unresolved batch: the
            # node lost track of this producer): the sequence was not used, give it back.
            self._next_sequence = batch.sequence
            raise

    def _resolve(self) -> bool:
        """Resend the unresolved batches in order, each with its sequence; True once all
        are settled."""
        while self._unresolved:
            batch = self._unresolved[0]
            try:
                self._attempt(batch, idempotent=True)
            except SequenceForgottenError:
                pass  # stored exactly once
            except (InvalidArgumentError, NotFoundError, SequenceGapError):
                # Refused outright: never stored, nor (numbers are stored in order) any
                # unresolved batch after it; free their numbers.
                self._next_sequence = batch.sequence
                self._unresolved.clear()
                return True
            except RaftlogError:
                return False
            self._unresolved.pop(0)
        return True

    def _number(self, batch: Batch) -> None:
        """Give a new batch of an idempotent producer the next sequence, once the unresolved
        ones are settled; UnavailableError (nothing sent, no number used) while they cannot
        be."""
        if not self.idempotent:
            return
        if self._unresolved and not self._resolve():
            raise UnavailableError(
                f"not sent: batch {self._unresolved[0].sequence} of this producer still has "
                "an unknown outcome and could not be resent; retry later"
            )
        batch.sequence = self._next_sequence
        self._next_sequence += 1

    def _attempt(self, batch: Batch, *, idempotent: bool) -> list[SendResult]:
        """One retried Produce of ``batch`` under the policy."""
        request = client_pb2.ProduceRequest(
            topic=batch.topic,
            messages=batch.messages,
            producer_id=self.producer_id,
            sequence=batch.sequence,
            delay_level=batch.delay[0],
            deliver_at_ms=batch.delay[1],
            transaction_group=batch.transaction_group,
        )

        def produce(timeout_s: float) -> Any:
            return self._connection.call(
                "Producer",
                "Produce",
                request,
                timeout_s=timeout_s,
                leader_only=True,
                write=True,
            )

        response = self._policy.run(produce, idempotent=idempotent)
        self._answered_at_s = time.monotonic()
        send_status = _SEND_STATUS_NAMES.get(response.send_status, "SEND_OK")
        topic, duplicate, stored_ms = batch.topic, response.duplicate, response.store_timestamp_ms
        return [
            _new_send_result(
                topic,
                result.queue_id,
                result.queue_offset,
                result.physical_offset,
                result.msg_id,
                duplicate,
                uniq_key,
                stored_ms,
                send_status,
                result.transaction_queue_id,
            )
            for result, uniq_key in zip(response.results, batch.uniq_keys, strict=False)
        ]

    # -- lifecycle -------------------------------------------------------------------------

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every batch queued so far is answered (bounded by ``timeout_s``,
        default the producer's timeout times the pending count)."""
        marker: Future[list[SendResult]] = Future()
        done = threading.Event()
        marker.add_done_callback(lambda _: done.set())
        with self._submit_lock:
            pending = self._queue.unfinished() + 1
        bound_s = timeout_s if timeout_s is not None else self.timeout_s * pending
        # An empty marker batch is not sent; it is answered when the sender reaches it.
        self._queue.put(Batch(topic="", messages=[], future=marker), timeout_s=bound_s)
        done.wait(bound_s)

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is queued, settle an unknown outcome if possible, stop the sender and
        close the connection (if this producer opened it). Idempotent."""
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
            pending = self._queue.unfinished() + 2
        bound_s = timeout_s if timeout_s is not None else self.timeout_s * pending
        # A full queue after the bound: the sender is stuck; join below is bounded anyway.
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout_s=bound_s)
        self._sender.join(bound_s)
        if self._check_stream is not None:
            self._check_stream.close()
        if self._owns_connection:
            self._connection.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
