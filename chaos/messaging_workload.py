"""The messaging part of a chaos workload: delayed, ordered, transactional and
reconsume-later traffic, recorded in a messaging history (chaos/messaging_check.py) that
:func:`~raftlog.chaos.messaging_check.check_messaging` judges after the run.

Workers (each one history process, one operation open at a time):

* ``delayer``: sends to ``<topic>-delay``, alternately with delay level 1 and with a
  ``deliver_at_ms`` 200-1500 ms ahead; a plain consumer group reads the topic and records
  each message with its store timestamp and the wall time it was received;
* ``orderer``: sends to ``<topic>-order`` with one of ``sharding_keys`` keys, a sequence per
  key; an orderly consumer group reads it, committing after each poll;
* ``transactor``: ``send_in_transaction`` to ``<topic>-txn``, cycling the decisions commit,
  rollback and unknown-then-commit (the local transaction answers UNKNOWN and the producer's
  transaction checker answers COMMIT); the checker answers every check-back from the decision
  recorded for that message, and records it (``txn-check``);
* ``retrier``: a plain producer feeds ``<topic>-retry``, and a consumer sends every third
  first-time message back with ``reconsume_later`` (recorded), reading its retry topic too.

After the traffic stops, :meth:`MessagingWorkload.drain` keeps the consumers reading until every
acknowledged delayed, committed and sent-back message has come back, or a bound.

Rules this module keeps: ``fail`` only when nothing was written (the producer's refusals that
say so), ``info`` for anything else that raised; an ``ok`` delayed send records a lower bound
of the due time the leader computed: deliver_at_ms, or the invoke's wall time + the level's
delay (the leader reads its clock after the invoke), so lateness is measured from it;
every loop is bounded by the deadline and a count, every call by a timeout.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raftlog.chaos.messaging_check import (
    COMMIT,
    DELAYED_SEND,
    HEALED,
    ORDERED_SEND,
    RECEIVE,
    RECONSUME_LATER,
    ROLLBACK,
    TXN_CHECK,
    TXN_SEND,
    UNKNOWN_THEN_COMMIT,
    MsgOp,
    OpType,
)
from raftlog.chaos.target import Target
from raftlog.client import (
    Consumer,
    InvalidArgumentError,
    Message,
    NotFoundError,
    NotLeaderError,
    Producer,
    ResourceExhaustedError,
    SequenceGapError,
    TransactionState,
    UnavailableError,
)

_NOT_WRITTEN = (
    NotLeaderError,
    UnavailableError,
    ResourceExhaustedError,
    InvalidArgumentError,
    NotFoundError,
    SequenceGapError,
)
MAX_OPS_PER_WORKER = 100_000
_POLL_TIMEOUT_S = 0.3
_DRAIN_POLL_S = 0.2
# The node's delay levels for a messaging chaos run (level 3 is a retry's first delay), the
# check-back timeout and interval, and the orderly queue lock's lease (a new leader grants no
# lock for one lease): short, so a run of under a minute sees delays, retries, check-backs and
# orderly consumption go on after each leader change.
CHAOS_DELAY_LEVELS = "1s 1s 1s 2s 2s 2s 3s 3s"
CHAOS_NODE_ARGS: tuple[str, ...] = (
    "--message-delay-level",
    CHAOS_DELAY_LEVELS,
    "--transaction-timeout-ms",
    "1000",
    "--transaction-check-interval-ms",
    "1000",
    "--consumer-lock-lease-ms",
    "3000",
)
_LEVEL_1_DELAY_MS = 1_000


@dataclass(frozen=True, slots=True)
class MessagingConfig:
    """The messaging traffic: ``topic`` is the prefix of its four topics (``queue_count``
    queues each); ``send_interval_s`` the pause between one worker's sends."""

    topic: str = "chaos-msg"
    queue_count: int = 2
    sharding_keys: int = 4
    send_interval_s: float = 0.05
    send_timeout_s: float = 10.0
    drain_timeout_s: float = 30.0

    def topics(self) -> dict[str, str]:
        """The role -> topic map."""
        return {role: f"{self.topic}-{role}" for role in ("delay", "order", "txn", "retry")}


class MessagingRecorder:
    """A thread-safe messaging history, appended to ``path`` as JSON lines as it goes."""

    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._ops: list[MsgOp] = []
        self._file = None if path is None else path.open("a", encoding="utf-8")

    def record(self, process: str, op_type: OpType, f: str, value: Mapping[str, Any]) -> None:
        with self._lock:
            op = MsgOp(process, op_type, f, time.monotonic_ns(), dict(value))
            self._ops.append(op)
            if self._file is not None:
                self._file.write(op.to_json_line() + "\n")
                self._file.flush()

    def ops(self) -> list[MsgOp]:
        with self._lock:
            return list(self._ops)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _message_fields(message: Message) -> dict[str, Any]:
    return {
        "value": message.body.decode(),
        "topic": message.topic,
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "store_timestamp_ms": message.store_timestamp_ms,
        "received_wall_ms": _now_ms(),
        "reconsume_times": message.reconsume_times,
    }


class MessagingWorkload:
    """Runs the messaging workers against ``target`` until ``stop()`` or the deadline."""

    def __init__(
        self, target: Target, recorder: MessagingRecorder, config: MessagingConfig
    ) -> None:
        self._target = target
        self._recorder = recorder
        self._config = config
        self._topics = config.topics()
        self._stop = threading.Event()
        self._consumers_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._deadline_s = 0.0
        self._decisions: dict[str, str] = {}
        # Values the consumers must see again before the drain ends (role -> values).
        self._awaited: dict[str, set[str]] = {role: set() for role in self._topics}
        self.errors: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, deadline_s: float) -> None:
        self._deadline_s = deadline_s
        workers: list[tuple[str, Callable[[str], None], bool]] = [
            ("delayer", self._delayer, False),
            ("orderer", self._orderer, False),
            ("transactor", self._transactor, False),
            ("retry-feeder", self._retry_feeder, False),
            ("delay-consumer", lambda p: self._plain_consumer(p, "delay"), True),
            ("txn-consumer", lambda p: self._plain_consumer(p, "txn"), True),
            ("order-consumer", self._orderly_consumer, True),
            ("retry-consumer", self._retry_consumer, True),
        ]
        for name, body, _ in workers:
            thread = threading.Thread(
                target=self._guard, args=(name, body), name=f"chaos-{name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop_producers(self) -> None:
        """Stop sending (the consumers go on until :meth:`drain`)."""
        self._stop.set()

    def healed(self) -> None:
        """Record that the nemesis has stopped every fault."""
        self._recorder.record("nemesis", "ok", HEALED, {"wall_ms": _now_ms()})

    def drain(self, timeout_s: float | None = None) -> bool:
        """Wait until every awaited value was received (True) or the bound (False), then stop
        the consumers and wait for every worker."""
        self._stop.set()
        bound_s = self._config.drain_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + bound_s
        done = False
        while time.monotonic() < deadline:
            with self._lock:
                done = not any(self._awaited.values())
            if done:
                break
            time.sleep(_DRAIN_POLL_S)
        self._consumers_stop.set()
        for thread in self._threads:
            thread.join(max(1.0, self._config.send_timeout_s))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            self._note(f"messaging workers still running: {', '.join(alive)}")
        return done

    def awaited_counts(self) -> dict[str, int]:
        with self._lock:
            return {role: len(values) for role, values in self._awaited.items()}

    def _producing(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self._deadline_s

    def _consuming(self) -> bool:
        return not self._consumers_stop.is_set()

    def _note(self, text: str) -> None:
        with self._lock:
            self.errors.append(text)

    def _guard(self, name: str, body: Callable[[str], None]) -> None:
        try:
            body(name)
        except Exception as error:
            self._note(f"{name} crashed: {error!r}")

    def _await(self, role: str, value: str) -> None:
        with self._lock:
            self._awaited[role].add(value)

    def _arrived(self, role: str, value: str) -> None:
        with self._lock:
            self._awaited[role].discard(value)

    def _producer(self, name: str, **kwargs: Any) -> Producer:
        return Producer(
            self._target.connect(),
            producer_id=f"chaos-{name}-{time.monotonic_ns()}",
            timeout_s=self._config.send_timeout_s,
            attempt_timeout_s=min(2.0, self._config.send_timeout_s),
            **kwargs,
        )

    def _numbers(self) -> Iterator[int]:
        for number in range(1, MAX_OPS_PER_WORKER + 1):
            if not self._producing():
                return
            yield number
            self._stop.wait(self._config.send_interval_s)

    def _call(
        self,
        process: str,
        f: str,
        value: dict[str, Any],
        send: Callable[[], dict[str, Any]],
        awaited_role: str | None = None,
    ) -> bool:
        """Record invoke, run ``send``, record its completion; True when ``ok``. With
        ``awaited_role`` the drain waits for the value (from before the send, as a consumer
        may get it before the answer), unless the send was not ``ok``."""
        if awaited_role is not None:
            self._await(awaited_role, str(value["value"]))
        self._recorder.record(process, "invoke", f, value)
        outcome: OpType = "ok"
        done: dict[str, Any] = {}
        try:
            done = send()
        except _NOT_WRITTEN:
            outcome = "fail"
        except Exception:
            outcome = "info"
        self._recorder.record(process, outcome, f, {**value, **done})
        if outcome != "ok" and awaited_role is not None:
            self._arrived(awaited_role, str(value["value"]))
        return outcome == "ok"

    # -- producers -------------------------------------------------------------------------

    def _delayer(self, process: str) -> None:
        topic = self._topics["delay"]
        with self._producer(process) as producer:
            for number in self._numbers():
                value = f"d-{number}"
                deliver_at_ms = 0 if number % 2 else _now_ms() + 200 + (number * 97) % 1300
                invoked = {
                    "value": value,
                    "topic": topic,
                    "delay_level": 0 if deliver_at_ms else 1,
                    "level_delay_ms": 0 if deliver_at_ms else _LEVEL_1_DELAY_MS,
                    "deliver_at_ms": deliver_at_ms,
                    "invoke_wall_ms": _now_ms(),
                }

                def send(invoked: dict[str, Any] = invoked) -> dict[str, Any]:
                    if invoked["deliver_at_ms"]:
                        result = producer.send(
                            topic, invoked["value"].encode(), deliver_at_ms=invoked["deliver_at_ms"]
                        )
                        due_ms = int(invoked["deliver_at_ms"])
                    else:
                        result = producer.send(topic, invoked["value"].encode(), delay_level=1)
                        # The leader adds the delay to its clock before storing: at or after
                        # the invoke (one machine, one clock), so this bounds the due time.
                        due_ms = int(invoked["invoke_wall_ms"]) + _LEVEL_1_DELAY_MS
                    return {"store_timestamp_ms": result.store_timestamp_ms, "due_ms": due_ms}

                self._call(process, DELAYED_SEND, invoked, send, "delay")

    def _orderer(self, process: str) -> None:
        topic = self._topics["order"]
        sequences = dict.fromkeys(range(self._config.sharding_keys), 0)
        with self._producer(process) as producer:
            for number in self._numbers():
                key_index = number % self._config.sharding_keys
                seq = sequences[key_index]
                sequences[key_index] += 1
                key = f"k{key_index}"
                value = f"o-{key}-{seq}"
                invoked = {"value": value, "topic": topic, "sharding_key": key, "seq": seq}

                def send(value: str = value, key: str = key) -> dict[str, Any]:
                    result = producer.send(topic, value.encode(), sharding_key=key)
                    return {"queue_id": result.queue_id, "queue_offset": result.queue_offset}

                self._call(process, ORDERED_SEND, invoked, send, "order")

    def _check_back(self, message: Message) -> TransactionState:
        value = message.body.decode()
        with self._lock:
            decision = self._decisions.get(value, ROLLBACK)
        state = TransactionState.ROLLBACK if decision == ROLLBACK else TransactionState.COMMIT
        self._recorder.record(
            "txn-checker", "ok", TXN_CHECK, {"value": value, "state": state.value}
        )
        return state

    def _transactor(self, process: str) -> None:
        topic = self._topics["txn"]
        decisions = itertools.cycle((COMMIT, ROLLBACK, UNKNOWN_THEN_COMMIT))
        local = {
            COMMIT: TransactionState.COMMIT,
            ROLLBACK: TransactionState.ROLLBACK,
            UNKNOWN_THEN_COMMIT: TransactionState.UNKNOWN,
        }
        with self._producer(
            process, transaction_checker=self._check_back, transaction_topics=(topic,)
        ) as producer:
            for number, decision in zip(self._numbers(), decisions, strict=False):
                value = f"t-{number}"
                with self._lock:
                    self._decisions[value] = decision
                invoked = {"value": value, "topic": topic, "decision": decision}

                def send(value: str = value, decision: str = decision) -> dict[str, Any]:
                    result = producer.send_in_transaction(
                        topic, value.encode(), local_transaction=lambda _m: local[decision]
                    )
                    return {"state": result.state.value, "local_state": result.local_state.value}

                awaited = None if decision == ROLLBACK else "txn"
                self._call(process, TXN_SEND, invoked, send, awaited)
            # The check-backs of the last transactions need this producer's checker: keep it
            # until the drain ends.
            self._consumers_stop.wait(self._config.drain_timeout_s + self._config.send_timeout_s)

    def _retry_feeder(self, process: str) -> None:
        topic = self._topics["retry"]
        with self._producer(process) as producer:
            for number in self._numbers():
                value = f"r-{number}"
                # Not a checked send (the main workload checks plain sends): no record.
                try:
                    producer.send(topic, value.encode())
                except Exception:
                    continue

    # -- consumers -------------------------------------------------------------------------

    def _record_receipts(self, group: str, messages: list[Message], *, orderly: bool) -> None:
        if messages:
            self._recorder.record(
                f"{group}-consumer",
                "ok",
                RECEIVE,
                {
                    "group": group,
                    "orderly": orderly,
                    "messages": [_message_fields(m) for m in messages],
                },
            )

    def _consumer(self, group: str, role: str, **kwargs: Any) -> Consumer:
        return Consumer(
            self._target.connect(),
            group=group,
            topic=self._topics[role],
            from_beginning=True,
            timeout_s=self._config.send_timeout_s,
            **kwargs,
        )

    def _poll_loop(self, consumer: Consumer, each: Callable[[list[Message]], None]) -> None:
        for _ in range(MAX_OPS_PER_WORKER):
            if not self._consuming():
                return
            try:
                messages = consumer.poll(timeout_s=_POLL_TIMEOUT_S)
            except Exception:
                self._consumers_stop.wait(_POLL_TIMEOUT_S)
                continue
            each(messages)
            if messages:
                # A lost commit only means a re-delivery, which the checker allows.
                with contextlib.suppress(Exception):
                    consumer.commit()

    def _plain_consumer(self, process: str, role: str) -> None:
        group = f"chaos-{role}"

        def each(messages: list[Message]) -> None:
            self._record_receipts(group, messages, orderly=False)
            for message in messages:
                self._arrived(role, message.body.decode())

        with self._consumer(group, role) as consumer:
            self._poll_loop(consumer, each)

    def _orderly_consumer(self, process: str) -> None:
        group = "chaos-order"

        def each(messages: list[Message]) -> None:
            self._record_receipts(group, messages, orderly=True)
            for message in messages:
                self._arrived("order", message.body.decode())

        with self._consumer(group, "order", orderly=True) as consumer:
            self._poll_loop(consumer, each)

    def _retry_consumer(self, process: str) -> None:
        group = "chaos-retry"

        def each(messages: list[Message]) -> None:
            self._record_receipts(group, messages, orderly=False)
            for message in messages:
                value = message.body.decode()
                self._arrived("retry", value)
                if message.reconsume_times or int(value.rsplit("-", 1)[1]) % 3:
                    continue
                invoked = {
                    "value": value,
                    "group": group,
                    "reconsume_times": message.reconsume_times,
                }

                def send(message: Message = message) -> dict[str, Any]:
                    consumer.reconsume_later(message)
                    return {}

                self._call(process, RECONSUME_LATER, invoked, send, "retry")

        with self._consumer(group, "retry", max_reconsume_times=3) as consumer:
            self._poll_loop(consumer, each)


def write_messaging_report(path: Path, report: Mapping[str, Any]) -> None:
    """Write the messaging report as JSON."""
    path.write_text(json.dumps(report, indent=2, sort_keys=True), encoding="utf-8")
