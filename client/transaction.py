"""Transactional sends: ``Producer.send_in_transaction`` and the producer's check-back
(RocketMQ's TransactionMQProducer; client.proto EndTransaction and TransactionChecks;
docs/messaging.md "Transactions").

``send_in_transaction`` stores the message as a half message (invisible to consumers), runs
``local_transaction(message)`` here, and ends the transaction as it answers: COMMIT makes the
leader write the message to its topic, ROLLBACK drops it, UNKNOWN (or an exception) leaves it
to the check-back. A producer made with a ``transaction_checker`` keeps a stream open to the
leader, which sends it the half messages of its group left undecided; the checker's answer
ends each one the same way.

Rules this module keeps:
- The local transaction runs only after the half is stored; a half whose send failed (or
  whose outcome is unknown: it may be stored) never runs it, so a checker must answer
  ROLLBACK for a transaction it has no record of.
- Ending is idempotent (the leader decides each transaction once), so an end whose outcome
  is unknown is retried under the producer's retry policy; when it still fails, the
  transaction is left to the check-back and the result says so (``state`` UNKNOWN,
  ``end_error``): ``send_in_transaction`` raises only when the half was not stored.
- The check stream is reopened wherever the leader is: at the leader a refusal names, else
  at the next member, with jittered backoff (0.1 s to 2 s) while none answers; it names the
  topics given at construction and every topic sent to since (a new one reopens it). Checks
  run one at a time on their own thread, so a slow checker never stalls the stream.
- Every callback error is caught and logged (rate-limited): a checker's exception is
  UNKNOWN, a local transaction's too.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import random
import re
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc

from raftlog.client.connection import Connection
from raftlog.client.errors import NotLeaderError, RaftlogError, from_rpc_error
from raftlog.client.messages import Message, SendResult
from raftlog.client.rate_limited_log import RateLimitedLog
from raftlog.client.retry import RetryPolicy
from raftlog.proto import client_pb2

_log = logging.getLogger(__name__)

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
"""RocketMQ's default producer group: give transactional producers a group of their own."""
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
"""Added to a checked message's properties: the check's number (1 for the first)."""
_BACKOFF_FIRST_S = 0.1
_BACKOFF_MAX_S = 2.0
_CLIENT_ID_CHARS = re.compile(r"[^A-Za-z0-9._@:%|-]")


class TransactionState(enum.Enum):
    """What a local transaction or a checker answers (RocketMQ's LocalTransactionState)."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


TransactionCallback = Callable[[Message], TransactionState]
_RESOLUTIONS = {
    TransactionState.COMMIT: client_pb2.TRANSACTION_RESOLUTION_COMMIT,
    TransactionState.ROLLBACK: client_pb2.TRANSACTION_RESOLUTION_ROLLBACK,
}
_STATES = {
    client_pb2.TRANSACTION_RESOLUTION_COMMIT: TransactionState.COMMIT,
    client_pb2.TRANSACTION_RESOLUTION_ROLLBACK: TransactionState.ROLLBACK,
}


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """How ``send_in_transaction`` went. ``half``: where the half message is (its ``msg_id``
    and ``uniq_key``, the ``transaction_id``, name the transaction); ``local_state``: what the
    local transaction answered (UNKNOWN for an exception); ``state``: how the transaction
    ended as the leader recorded it -- COMMIT or ROLLBACK (possibly decided before, e.g.
    rolled back by the leader after its last check: ``duplicate``), or UNKNOWN: left to the
    check-back (``end_error`` says why when the end failed); ``result``: where the committed
    message was stored (a commit, not a duplicate)."""

    half: SendResult
    transaction_id: str
    local_state: TransactionState
    state: TransactionState
    result: SendResult | None = None
    duplicate: bool = False
    end_error: RaftlogError | None = None

    @property
    def committed(self) -> bool:
        return self.state is TransactionState.COMMIT


def local_message(topic: str, proto: Any, half: SendResult) -> Message:
    """The message ``local_transaction`` gets: the sent fields, its real topic and queue,
    and the half's place (msg_id, offsets, store time)."""
    return Message(
        topic=topic,
        queue_id=half.transaction_queue_id,
        queue_offset=half.queue_offset,
        physical_offset=half.physical_offset,
        msg_id=half.msg_id,
        body=bytes(proto.body),
        store_timestamp_ms=half.store_timestamp_ms,
        keys=tuple(proto.keys),
        tags=proto.tags,
        uniq_key=proto.uniq_key,
        properties=tuple((p.name, p.value) for p in proto.properties),
        flag=proto.flag,
        born_timestamp_ms=proto.born_timestamp_ms,
    )


def run_callback(callback: TransactionCallback, message: Message, what: str) -> TransactionState:
    """``callback(message)``, or UNKNOWN (logged) when it raises or answers something else."""
    try:
        state = callback(message)
    except Exception:
        _log.exception("%s raised for transaction %s: UNKNOWN", what, message.uniq_key)
        return TransactionState.UNKNOWN
    if not isinstance(state, TransactionState):
        _log.warning("%s answered %r, not a TransactionState: UNKNOWN", what, state)
        return TransactionState.UNKNOWN
    return state


def default_client_id() -> str:
    """``host@pid@random``, in the characters a client id may hold."""
    host = _CLIENT_ID_CHARS.sub("-", socket.gethostname())[:64] or "host"
    return f"{host}@{os.getpid()}@{uuid.uuid4().hex[:8]}"


class TransactionEnds:
    """Ends transactions of one producer group through EndTransaction (retried: idempotent)."""

    def __init__(self, connection: Connection, group: str, policy: RetryPolicy) -> None:
        self._connection = connection
        self._group = group
        self._policy = policy

    def end(
        self, message: Message, state: TransactionState, *, from_check: bool
    ) -> tuple[TransactionState, SendResult | None, bool]:
        """End ``message``'s transaction with ``state`` (COMMIT or ROLLBACK); returns the
        recorded decision, the committed message's place, and whether it was decided before.
        Raises RaftlogError."""
        request = client_pb2.EndTransactionRequest(
            producer_group=self._group,
            topic=message.topic,
            transaction_id=message.uniq_key,
            msg_id=message.msg_id,
            resolution=_RESOLUTIONS[state],
            from_check=from_check,
        )

        def attempt(timeout_s: float) -> Any:
            return self._connection.call(
                "Producer",
                "EndTransaction",
                request,
                timeout_s=timeout_s,
                leader_only=True,
                write=True,
            )

        response = self._policy.run(attempt, idempotent=True)
        result = None
        if response.HasField("result"):
            result = SendResult(
                topic=message.topic,
                queue_id=response.result.queue_id,
                queue_offset=response.result.queue_offset,
                physical_offset=response.result.physical_offset,
                msg_id=response.result.msg_id,
                uniq_key=message.uniq_key,
            )
        decided = _STATES.get(response.resolution, TransactionState.UNKNOWN)
        return decided, result, response.duplicate


def finish(
    ends: TransactionEnds,
    message: Message,
    half: SendResult,
    local_transaction: TransactionCallback,
) -> TransactionSendResult:
    """Run the local transaction for a stored half and end the transaction as it answers."""
    local_state = run_callback(local_transaction, message, "local_transaction")
    if local_state is TransactionState.UNKNOWN:
        return TransactionSendResult(half, message.uniq_key, local_state, local_state)
    try:
        decided, result, duplicate = ends.end(message, local_state, from_check=False)
    except RaftlogError as error:
        _log.warning(
            "transaction %s: ending it %s failed (%s); the leader will check it back",
            message.uniq_key,
            local_state.value,
            error,
        )
        return TransactionSendResult(
            half, message.uniq_key, local_state, TransactionState.UNKNOWN, end_error=error
        )
    return TransactionSendResult(half, message.uniq_key, local_state, decided, result, duplicate)


class CheckStream:
    """The producer's TransactionChecks stream, on a thread of its own (see the module)."""

    def __init__(
        self,
        connection: Connection,
        group: str,
        checker: TransactionCallback,
        ends: TransactionEnds,
        topics: Iterable[str] = (),
        client_id: str | None = None,
    ) -> None:
        self._connection = connection
        self._group = group
        self._checker = checker
        self._ends = ends
        self.client_id = client_id or default_client_id()
        self._lock = threading.Lock()
        self._topics: set[str] = set(topics)
        self._call: Any = None
        self._closed = threading.Event()
        self._changed = threading.Event()
        self.registered = threading.Event()
        self._failures = RateLimitedLog(_log)
        self._checks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="raftlog-check")
        self._thread = threading.Thread(
            target=self._run, name="raftlog-transaction-checks", daemon=True
        )
        self._thread.start()

    def add_topic(self, topic: str) -> None:
        """Take checks of ``topic`` too (reopens the stream when it is new)."""
        with self._lock:
            if topic in self._topics:
                return
            self._topics.add(topic)
            call = self._call
        self._changed.set()
        if call is not None:
            call.cancel()

    def close(self, timeout_s: float = 5.0) -> None:
        self._closed.set()
        self._changed.set()
        with self._lock:
            call = self._call
        if call is not None:
            call.cancel()
        self._thread.join(timeout_s)
        self._checks.shutdown(wait=False, cancel_futures=True)

    # -- the stream thread -----------------------------------------------------------------

    def _run(self) -> None:
        backoff_s = _BACKOFF_FIRST_S
        turn = 0
        while not self._closed.is_set():
            with self._lock:
                topics = sorted(self._topics)
            if not topics:
                self._changed.wait()
                self._changed.clear()
                continue
            self._changed.clear()
            address = self._target(turn)
            turn += 1
            if self._follow(address, topics):
                backoff_s = _BACKOFF_FIRST_S
                continue
            self._closed.wait(random.uniform(0, backoff_s))
            backoff_s = min(_BACKOFF_MAX_S, backoff_s * 2)

    def _target(self, turn: int) -> str:
        leader = self._connection.leader_address
        if leader is not None:
            return leader
        addresses = self._connection.addresses
        return addresses[turn % len(addresses)]

    def _follow(self, address: str, topics: list[str]) -> bool:
        """Read one stream at ``address`` until it ends; True when the next one may be opened
        at once (a redirect, a topic change), False to back off first."""
        request = client_pb2.TransactionChecksRequest(
            producer_group=self._group, client_id=self.client_id, topics=topics
        )
        received = False
        try:
            call = self._connection.stub("Producer", address).TransactionChecks(request)
            with self._lock:
                self._call = call
            if self._closed.is_set() or self._changed.is_set():
                call.cancel()
            for check in call:
                received = True
                self._received(check)
        except grpc.RpcError as rpc_error:
            if self._closed.is_set() or self._changed.is_set():
                return True
            error = from_rpc_error(rpc_error, write=False, address=address)
            return self._failed(address, error)
        except RaftlogError as error:  # the connection is closed
            return self._failed(address, error)
        finally:
            self.registered.clear()
            with self._lock:
                self._call = None
        return received  # a stream that ended before a word: back off before the next

    def _failed(self, address: str, error: RaftlogError) -> bool:
        if isinstance(error, NotLeaderError) and error.leader_address not in (None, address):
            self._connection.note_leader(error.leader_address, error.term)
            return True
        if self._connection.leader_address == address:
            self._connection.note_leader(None)
        self._failures.warning("transaction check stream at %s: %s", address, error)
        return False

    def _received(self, check: Any) -> None:
        if not check.HasField("message"):
            self.registered.set()
            return
        message = Message.from_proto(check.message)
        times = (PROPERTY_CHECK_TIMES, str(check.check_times))
        message = _with_properties(message, (*message.properties, times))
        self._checks.submit(self._check, message)

    def _check(self, message: Message) -> None:
        state = run_callback(self._checker, message, "transaction_checker")
        if state is TransactionState.UNKNOWN:
            return
        try:
            self._ends.end(message, state, from_check=True)
        except RaftlogError as error:
            self._failures.warning(
                "transaction %s: the checker's %s was not recorded (%s); it is checked again",
                message.uniq_key,
                state.value,
                error,
            )


def _with_properties(message: Message, properties: tuple[tuple[str, str], ...]) -> Message:
    return dataclasses.replace(message, properties=properties)
