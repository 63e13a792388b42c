"""Producer.send_in_transaction and the check-back stream against a scripted server: the half
goes out with its group, the local transaction's answer ends it (or leaves it to the
check-back), and a checker answers the leader's checks, wherever the leader is."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from raftlog.client import (
    InvalidArgumentError,
    Message,
    Producer,
    TransactionState,
)
from raftlog.proto import client_pb2
from tests.unit.client.fake_server import FakeServer, abort_with, not_leader_trailers

COMMIT = client_pb2.TRANSACTION_RESOLUTION_COMMIT
ROLLBACK = client_pb2.TRANSACTION_RESOLUTION_ROLLBACK
WAIT_S = 10.0


@pytest.fixture
def server() -> Iterator[FakeServer]:
    running = FakeServer().start()
    try:
        yield running
    finally:
        running.stop()


def script_half(server: FakeServer, sent: list[Any]) -> None:
    def produce(request: Any, context: Any) -> Any:
        sent.append(request)
        result = client_pb2.ProduceResult(
            queue_id=0, queue_offset=7, physical_offset=700, msg_id="HALF", transaction_queue_id=3
        )
        return client_pb2.ProduceResponse(results=[result], store_timestamp_ms=5)

    server.hooks["Produce"] = produce


def script_end(server: FakeServer, ended: list[Any], resolution: int = 0, **fields: Any) -> None:
    def end(request: Any, context: Any) -> Any:
        ended.append(request)
        response = client_pb2.EndTransactionResponse(
            resolution=resolution or request.resolution, **fields
        )
        if request.resolution == COMMIT and not fields.get("duplicate"):
            response.result.CopyFrom(client_pb2.ProduceResult(queue_id=3, msg_id="REAL"))
        return response

    server.hooks["EndTransaction"] = end


def test_a_commit_sends_the_half_runs_the_local_transaction_and_commits(
    server: FakeServer,
) -> None:
    sent: list[Any] = []
    ended: list[Any] = []
    script_half(server, sent)
    script_end(server, ended)
    seen: list[Message] = []

    def local(message: Message) -> TransactionState:
        seen.append(message)
        return TransactionState.COMMIT

    with Producer(server.address, group="payments") as producer:
        result = producer.send_in_transaction(
            "orders", b"paid", local_transaction=local, tags="TagA", key="order-1"
        )
    (request,) = sent
    assert (request.topic, request.transaction_group, len(request.messages)) == (
        "orders",
        "payments",
        1,
    )
    (message,) = seen
    assert (message.topic, message.queue_id, message.msg_id, message.body, message.tags) == (
        "orders",
        3,
        "HALF",
        b"paid",
        "TagA",
    )
    assert message.uniq_key == request.messages[0].uniq_key == result.transaction_id
    (end,) = ended
    assert (end.producer_group, end.topic, end.msg_id, end.transaction_id) == (
        "payments",
        "orders",
        "HALF",
        result.transaction_id,
    )
    assert end.resolution == COMMIT and not end.from_check
    assert result.committed and result.local_state is TransactionState.COMMIT
    assert result.result is not None and result.result.msg_id == "REAL"
    assert result.half.msg_id == "HALF"


def test_rollback_unknown_and_a_failing_local_transaction(server: FakeServer) -> None:
    script_half(server, [])
    ended: list[Any] = []
    script_end(server, ended)

    def broken(message: Message) -> TransactionState:
        raise RuntimeError("the database is down")

    with Producer(server.address) as producer:
        rolled_back = producer.send_in_transaction(
            "orders", b"x", local_transaction=lambda m: TransactionState.ROLLBACK
        )
        unknown = producer.send_in_transaction(
            "orders", b"x", local_transaction=lambda m: TransactionState.UNKNOWN
        )
        failed = producer.send_in_transaction("orders", b"x", local_transaction=broken)
    assert [e.resolution for e in ended] == [ROLLBACK]
    assert rolled_back.state is TransactionState.ROLLBACK and rolled_back.result is None
    for result in (unknown, failed):
        assert result.state is result.local_state is TransactionState.UNKNOWN
    assert ended[0].producer_group == "DEFAULT_PRODUCER"


def test_the_recorded_decision_wins_and_a_failed_end_is_left_to_the_check_back(
    server: FakeServer,
) -> None:
    script_half(server, [])
    script_end(server, [], resolution=ROLLBACK, duplicate=True)
    with Producer(server.address) as producer:
        late = producer.send_in_transaction(
            "orders", b"x", local_transaction=lambda m: TransactionState.COMMIT
        )
        assert late.state is TransactionState.ROLLBACK and late.duplicate
        server.hooks["EndTransaction"] = abort_with(grpc.StatusCode.INVALID_ARGUMENT, "no")
        failed = producer.send_in_transaction(
            "orders", b"x", local_transaction=lambda m: TransactionState.COMMIT
        )
    assert failed.state is TransactionState.UNKNOWN
    assert isinstance(failed.end_error, InvalidArgumentError)


def test_a_half_not_stored_raises_and_runs_nothing(server: FakeServer) -> None:
    server.hooks["Produce"] = abort_with(grpc.StatusCode.INVALID_ARGUMENT, "bad")
    ran: list[Message] = []
    with Producer(server.address) as producer, pytest.raises(InvalidArgumentError):
        producer.send_in_transaction(
            "orders", b"x", local_transaction=lambda m: ran.append(m) or TransactionState.COMMIT
        )
    assert ran == []


def check_stream(checks: list[Any], opened: list[Any], release: threading.Event) -> Any:
    def stream(request: Any, context: Any) -> Iterator[Any]:
        opened.append(request)
        yield client_pb2.TransactionCheck()
        yield from checks
        release.wait(WAIT_S)

    return stream


def wait_until(condition: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_checker_answers_checks_wherever_the_leader_is(server: FakeServer) -> None:
    leader = FakeServer().start()
    release = threading.Event()
    try:
        server.hooks["TransactionChecks"] = abort_with(
            grpc.StatusCode.FAILED_PRECONDITION, "not leader", not_leader_trailers(leader.address)
        )
        checked = client_pb2.StoredMessage(
            topic="orders", queue_id=1, msg_id="HALF", uniq_key="TX1", body=b"x"
        )
        checks = [
            client_pb2.TransactionCheck(message=checked, transaction_id="TX1", check_times=2),
            client_pb2.TransactionCheck(message=checked, transaction_id="TX1", check_times=3),
        ]
        opened: list[Any] = []
        leader.hooks["TransactionChecks"] = check_stream(checks, opened, release)
        ended: list[Any] = []
        script_end(leader, ended)
        answers = iter([TransactionState.COMMIT])
        asked: list[Message] = []

        def checker(message: Message) -> TransactionState:
            asked.append(message)
            return next(answers)  # the second check raises StopIteration: UNKNOWN

        with Producer(
            server.address, group="payments", transaction_checker=checker,
            transaction_topics=["orders"],
        ):  # fmt: skip
            wait_until(lambda: len(asked) == 2)
        assert [(r.producer_group, list(r.topics)) for r in opened] == [("payments", ["orders"])]
        assert asked[0].topic == "orders" and asked[0].msg_id == "HALF"
        assert ("TRANSACTION_CHECK_TIMES", "2") in asked[0].properties
        (end,) = ended
        assert (end.msg_id, end.transaction_id, end.resolution, end.from_check) == (
            "HALF",
            "TX1",
            COMMIT,
            True,
        )
    finally:
        release.set()
        leader.stop()


def test_a_new_topic_reopens_the_stream_with_it(server: FakeServer) -> None:
    release = threading.Event()
    opened: list[Any] = []
    server.hooks["TransactionChecks"] = check_stream([], opened, release)
    script_half(server, [])
    script_end(server, [])
    try:
        with Producer(
            server.address, transaction_checker=lambda m: TransactionState.UNKNOWN
        ) as producer:
            time.sleep(0.2)
            assert opened == []  # no topic yet: nothing to be checked
            producer.send_in_transaction(
                "orders", b"x", local_transaction=lambda m: TransactionState.COMMIT
            )
            wait_until(lambda: len(opened) == 1)
            producer.send_in_transaction(
                "refunds", b"x", local_transaction=lambda m: TransactionState.COMMIT
            )
            wait_until(lambda: len(opened) == 2)
        assert [sorted(r.topics) for r in opened] == [["orders"], ["orders", "refunds"]]
    finally:
        release.set()
