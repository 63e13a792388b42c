"""The producer: sends messages to the leader, optionally idempotent, in order.

Rules this module keeps:
- Batches are sent one at a time, in the order they were submitted, so an idempotent
  producer's batches reach the server in sequence order, as ProduceRequest.sequence requires.
  ``send_async`` queues to one sender thread. A synchronous ``send``/``send_batch`` with
  nothing queued or in flight sends from the caller's thread instead (under the same send
  lock, so the order holds): two thread hand-offs fewer per message.
- Idempotent producer (the default): a batch gets the next sequence number when it is first
  sent, and keeps it across every retry (same producer_id + sequence), so retrying an unknown
  outcome stores it at most once. A batch refused with "nothing written" gives its number
  back. A batch whose outcome stayed unknown after all retries is reported to its caller as
  UnknownOutcomeError, and it is resent (same sequence) before any later batch, so it ends up
  stored exactly once and later batches never leave a gap; while it cannot be resolved, later
  batches fail with UnavailableError without being sent. OUT_OF_RANGE (a gap) is answered by
  resending the unresolved batch first, then the refused one.
- A non-idempotent producer (``idempotent=False``) never retries an unknown outcome: it is
  surfaced as UnknownOutcomeError (the batch may be stored once, or not at all).
- Each message without a ``uniq_key`` gets a fresh UUID, so it can be found by key later.
- Pending batches are bounded (``max_pending_batches``); ``send_async`` blocks up to
  ``timeout_s`` for room, then raises ResourceExhaustedError.
- Transactional sends (``send_in_transaction``, client/transaction.py) go through the same
  ordered, idempotent path as a batch of one, never coalesced with another.
- Batches of one topic queued behind each other are coalesced into one request (at most
  ``MAX_COALESCED_MESSAGES`` messages / ``MAX_COALESCED_BYTES``), in order: many
  ``send_async`` calls cost one round trip and one Raft entry. A coalesced request is atomic;
  if it is refused for its content, its members are resent one by one.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
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
from raftlog.client.retry import RetryPolicy
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
# The API's SendStatus -> RocketMQ's names (SendResult.send_status).
_SEND_STATUS_NAMES = {
    client_pb2.SEND_STATUS_OK: "SEND_OK",
    client_pb2.SEND_STATUS_FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    client_pb2.SEND_STATUS_SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}


@dataclass
class _Batch:
    """One ProduceRequest waiting to be sent (or resolved). ``sequence`` is 0 until sent.
    The future holds the list of SendResults, or, for a ``single`` message (``send_async``),
    its one SendResult: one Future per message, not two chained (a Future is a Condition and
    a lock; two of them and a callback were a third of ``send_async``'s time)."""

    topic: str
    messages: list[Any]
    future: Future[Any]
    sequence: int = 0
    uniq_keys: list[str] = field(default_factory=list)
    single: bool = False
    # ProduceRequest.delay_level / deliver_at_ms (0: none): only equal delays coalesce.
    delay: tuple[int, int] = (0, 0)
    # ProduceRequest.transaction_group ("": an ordinary send): a half message, never coalesced.
    transaction_group: str = ""

    @classmethod
    def of(
        cls,
        topic: str,
        messages: list[Any],
        *,
        single: bool = False,
        delay_level: int = 0,
        deliver_at_ms: int = 0,
    ) -> _Batch:
        """A new batch of ProduceMessages."""
        if not messages:
            raise ValueError("a batch holds at least one message")
        uniq_keys = [m.uniq_key for m in messages]
        delay = _delay(delay_level, deliver_at_ms)
        return cls(topic, messages, Future(), uniq_keys=uniq_keys, single=single, delay=delay)

    def settle(self, results: list[SendResult]) -> None:
        self.future.set_result(results[0] if self.single else results)


def _delay(delay_level: int, deliver_at_ms: int) -> tuple[int, int]:
    """A send's delay fields, checked for form (the node checks them against its bounds)."""
    if delay_level and deliver_at_ms:
        raise ValueError("set at most one of delay_level and deliver_at_ms")
    if delay_level < 0 or deliver_at_ms < 0:
        raise ValueError(f"delay_level {delay_level} / deliver_at_ms {deliver_at_ms} < 0")
    return delay_level, deliver_at_ms


def _properties(properties: Mapping[str, str] | Sequence[tuple[str, str]]) -> list[Any]:
    pairs = properties.items() if isinstance(properties, Mapping) else properties
    return [client_pb2.Property(name=name, value=value) for name, value in pairs]


class _UniqKeys:
    """Message unique keys (UNIQ_KEY) without a uuid4 per message, which cost the producer
    about a sixth of its time: 32 hex digits as RocketMQ's, a random 80-bit prefix per
    process (drawn again after a fork) and a 48-bit counter."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._prefix = os.urandom(10).hex().upper()
        self._counter = itertools.count(int.from_bytes(os.urandom(2), "big") << 24)

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter) & 0xFFFFFFFFFFFF:012X}"


_UNIQ_KEYS = _UniqKeys()


def _message_proto(
    body: bytes,
    *,
    keys: Sequence[str] = (),
    tags: str = "",
    queue_id: int | None = None,
    sharding_key: str | None = None,
    properties: Mapping[str, str] | Sequence[tuple[str, str]] = (),
    uniq_key: str = "",
    flag: int = 0,
    born_timestamp_ms: int = 0,
) -> Any:
    """One ProduceMessage, setting only the fields given (each keyword a protobuf call saved:
    this runs once per message, and was a fifth of ``send_async``'s time)."""
    if not isinstance(body, bytes):
        if not isinstance(body, bytearray | memoryview):
            raise TypeError(f"body must be bytes, not {type(body).__name__}")
        body = bytes(body)
    proto = client_pb2.ProduceMessage(body=body, uniq_key=uniq_key or _UNIQ_KEYS.next())
    if keys:
        proto.keys.extend(keys)
    if tags:
        proto.tags = tags
    if properties:
        proto.properties.extend(_properties(properties))
    if flag:
        proto.flag = flag
    if born_timestamp_ms:
        proto.born_timestamp_ms = born_timestamp_ms
    if queue_id is not None:
        if sharding_key is not None:
            raise ValueError("set at most one of queue_id and sharding_key")
        proto.queue_id = queue_id
    elif sharding_key is not None:
        proto.sharding_key = sharding_key
    return proto


def _one(
    topic: str,
    body: bytes,
    key: str | None,
    keys: Sequence[str],
    tags: str,
    queue_id: int | None,
    sharding_key: str | None,
    properties: Mapping[str, str] | Sequence[tuple[str, str]],
    uniq_key: str,
    *,
    single: bool = False,
    delay: tuple[int, int] = (0, 0),
) -> _Batch:
    """The batch of ``send``/``send_async``'s one message (their keyword arguments)."""
    message = _message_proto(
        body,
        keys=([key] if key else []) + list(keys) if key or keys else (),
        tags=tags,
        queue_id=queue_id,
        sharding_key=sharding_key,
        properties=properties,
        uniq_key=uniq_key,
    )
    return _Batch.of(topic, [message], single=single, delay_level=delay[0], deliver_at_ms=delay[1])


def _to_proto(message: OutgoingMessage | bytes) -> Any:
    if not isinstance(message, OutgoingMessage):
        return _message_proto(message)
    return _message_proto(
        message.body,
        keys=message.keys,
        tags=message.tags,
        queue_id=message.queue_id,
        sharding_key=message.sharding_key,
        properties=message.properties,
        uniq_key=message.uniq_key,
        flag=message.flag,
        born_timestamp_ms=message.born_timestamp_ms,
    )


class Producer:
    """Sends messages to a raftlog cluster.

    ``addresses``: the members ("host:port", a list or a comma-separated string; any subset
    reaches the leader through redirects). ``idempotent``: see the module rules.
    ``producer_id``: the idempotent producer's id (default: a fresh UUID); when you pass an id
    you reuse across process restarts, also pass ``first_sequence`` one past the last
    sequence that id ever sent, or new batches are taken for resends. ``timeout_s``: the
    total time one batch may take, retries included.

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
        # The one batch whose outcome is unknown (at most one: nothing later is sent
        # while it is unresolved).
        self._unresolved: _Batch | None = None
        self._queue: queue.Queue[_Batch | None] = queue.Queue(maxsize=max_pending_batches)
        # A queued item taken while coalescing that must go first in the next request.
        self._carry: _Batch | None = None
        self._submit_lock = threading.Lock()
        # Held while a batch is being sent (by the sender thread or a direct ``send``).
        self._send_lock = threading.Lock()
        self._closed = False
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
        batch = _one(topic, body, *fields, delay=_delay(delay_level, deliver_at_ms))
        results: list[SendResult] = self._send_batch_now(batch)
        return results[0]

    def send_batch(
        self, topic: str, messages: Sequence[OutgoingMessage | bytes]
    ) -> list[SendResult]:
        """Send a batch (stored atomically: all or none) and wait; results in order."""
        return self._send_batch_now(_Batch.of(topic, [_to_proto(m) for m in messages]))

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
        batch = _one(topic, body, *fields)
        batch.transaction_group = self.group
        half = self._send_batch_now(batch)[0]
        message = local_message(topic, batch.messages[0], half)
        return finish(self._ends, message, half, local_transaction)

    def _send_batch_now(self, batch: _Batch) -> list[SendResult]:
        """Send from this thread when nothing is queued or being sent (the order then holds
        trivially); otherwise queue behind the others and wait."""
        with self._submit_lock:
            if self._closed:
                raise RaftlogError("the producer is closed")
            direct = self._queue.unfinished_tasks == 0 and self._send_lock.acquire(blocking=False)
            if not direct:
                self._enqueue(batch)
        if direct:
            try:
                batch.future.set_running_or_notify_cancel()
                self._send_one(batch)
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
        batch = _one(topic, body, *fields, single=True, delay=_delay(delay_level, deliver_at_ms))
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
        batch = _Batch.of(topic, [_to_proto(m) for m in messages])
        with self._submit_lock:
            if self._closed:
                raise RaftlogError("the producer is closed")
            self._enqueue(batch)
        return batch.future

    def _enqueue(self, batch: _Batch) -> None:
        """Queue ``batch`` for the sender thread (the caller holds ``_submit_lock``)."""
        try:
            self._queue.put(batch, timeout=self.timeout_s)
        except queue.Full:
            raise ResourceExhaustedError(
                f"{self._queue.maxsize} batches are already pending; none freed within "
                f"{self.timeout_s:.1f} s"
            ) from None

    # -- the sender thread -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = self._carry if self._carry is not None else self._queue.get()
            self._carry = None
            if batch is None:
                break
            with self._send_lock:
                finished = self._process(batch)
            for _ in range(finished):
                self._queue.task_done()
        # Closing: one last bounded try to settle an unknown outcome, so it is stored once.
        with self._send_lock:
            if self._unresolved is not None:
                self._resolve()

    def _process(self, batch: _Batch) -> int:
        """Send ``batch`` (and what coalesces with it); returns how many queued items it
        finished (``_carry`` is not one of them: it stays queued work)."""
        if not batch.future.set_running_or_notify_cancel():
            return 1  # cancelled before it was sent: nothing to do, no sequence used
        if not batch.messages:
            batch.future.set_result([])  # a flush marker: everything before it is done
            return 1
        joined, skipped = self._coalesce(batch)
        if not joined:
            self._send_one(batch)
        else:
            self._send_coalesced([batch, *joined])
        return 1 + len(joined) + skipped

    def _coalesce(self, first: _Batch) -> tuple[list[_Batch], int]:
        """Batches queued right behind ``first`` for the same topic, to go in the same
        request (a producer calling ``send_async`` in a loop gets Kafka-style batching for
        free: one Raft entry and one round trip for many sends). Order is kept: the first
        batch that cannot join waits in ``_carry`` for the next request. Returns the joined
        batches and how many cancelled ones were skipped."""
        joined: list[_Batch] = []
        skipped = 0
        message_count = len(first.messages)
        size_bytes = sum(len(m.body) for m in first.messages)
        while message_count < MAX_COALESCED_MESSAGES and size_bytes < MAX_COALESCED_BYTES:
            try:
                candidate = self._queue.get_nowait()
            except queue.Empty:
                break
            if (
                candidate is None
                or not candidate.messages
                or candidate.topic != first.topic
                or candidate.delay != first.delay
                or candidate.transaction_group
                or first.transaction_group
                or message_count + len(candidate.messages) > MAX_COALESCED_MESSAGES
            ):
                self._carry = candidate
                break
            if not candidate.future.set_running_or_notify_cancel():
                skipped += 1
                continue
            joined.append(candidate)
            message_count += len(candidate.messages)
            size_bytes += sum(len(m.body) for m in candidate.messages)
        return joined, skipped

    def _send_one(self, batch: _Batch) -> None:
        try:
            batch.settle(self._deliver(batch))
        except RaftlogError as error:
            batch.future.set_exception(error)
        except Exception as error:  # a bug must fail the future, not kill the thread
            batch.future.set_exception(RaftlogError(f"internal client error: {error!r}"))

    def _send_coalesced(self, members: list[_Batch]) -> None:
        """One request for every member; results are handed back per member. A request
        refused for its content (one member's bad message) wrote nothing: each member is
        then sent alone, so only the bad one fails."""
        merged = _Batch(
            topic=members[0].topic,
            messages=[m for member in members for m in member.messages],
            future=Future(),
            uniq_keys=[k for member in members for k in member.uniq_keys],
            delay=members[0].delay,
        )
        try:
            results = self._deliver(merged)
        except (InvalidArgumentError, NotFoundError):
            for member in members:
                self._send_one(member)
            return
        except RaftlogError as error:
            for member in members:
                member.future.set_exception(error)
            return
        except Exception as error:  # a bug must fail the futures, not kill the thread
            for member in members:
                member.future.set_exception(RaftlogError(f"internal client error: {error!r}"))
            return
        start = 0
        for member in members:
            member.settle(results[start : start + len(member.messages)])
            start += len(member.messages)

    def _deliver(self, batch: _Batch) -> list[SendResult]:
        """Send a new batch (idempotent: after settling any unresolved one)."""
        if not self.idempotent:
            return self._attempt(batch, idempotent=False)
        if self._unresolved is not None and not self._resolve():
            raise UnavailableError(
                f"not sent: batch {self._unresolved.sequence} of this producer still has an "
                "unknown outcome and could not be resent; retry later"
            )
        batch.sequence = self._next_sequence
        self._next_sequence += 1
        try:
            return self._attempt(batch, idempotent=True)
        except SequenceGapError:
            # Nothing was written; without an earlier unresolved batch to resend, the server
            # lost track of this producer: give the number back and report it.
            self._next_sequence = batch.sequence
            raise
        except UnknownOutcomeError:
            self._unresolved = batch
            raise
        except SequenceForgottenError:
            raise  # stored exactly once: the sequence is used
        except RaftlogError:
            # Refused with nothing written: the sequence was not used, give it back.
            self._next_sequence = batch.sequence
            raise

    def _resolve(self) -> bool:
        """Resend the unresolved batch with its sequence; True once it is settled."""
        batch = self._unresolved
        if batch is None:
            return True
        try:
            self._attempt(batch, idempotent=True)
        except SequenceForgottenError:
            pass  # stored exactly once
        except (InvalidArgumentError, NotFoundError):
            # The same request is refused outright: it was never stored; free its number.
            self._next_sequence = batch.sequence
        except RaftlogError:
            return False
        self._unresolved = None
        return True

    def _attempt(self, batch: _Batch, *, idempotent: bool) -> list[SendResult]:
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
        send_status = _SEND_STATUS_NAMES.get(response.send_status, "SEND_OK")
        return [
            SendResult(
                topic=batch.topic,
                queue_id=result.queue_id,
                queue_offset=result.queue_offset,
                physical_offset=result.physical_offset,
                msg_id=result.msg_id,
                duplicate=response.duplicate,
                uniq_key=uniq_key,
                store_timestamp_ms=response.store_timestamp_ms,
                send_status=send_status,
                transaction_queue_id=result.transaction_queue_id,
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
            pending = self._queue.qsize() + 1
        bound_s = timeout_s if timeout_s is not None else self.timeout_s * pending
        # An empty marker batch is not sent; it is answered when the sender reaches it.
        self._queue.put(_Batch(topic="", messages=[], future=marker), timeout=bound_s)
        done.wait(bound_s)

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is queued, settle an unknown outcome if possible, stop the sender and
        close the connection (if this producer opened it). Idempotent."""
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
            pending = self._queue.qsize() + 2
        bound_s = timeout_s if timeout_s is not None else self.timeout_s * pending
        # A full queue after the bound: the sender is stuck; join below is bounded anyway.
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=bound_s)
        self._sender.join(bound_s)
        if self._check_stream is not None:
            self._check_stream.close()
        if self._owns_connection:
            self._connection.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
