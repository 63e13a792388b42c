"""The Producer service's transactional calls, short of replication: the checks a half, an
EndTransaction and a check stream must pass, the refusal of a node without transactions
(master-slave), and how a decision and a check are answered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import grpc
import pytest

from raftlog.node.errors import InvalidRequestError
from raftlog.node.messaging.transaction import HALF_TOPIC, HalfMessage, to_half
from raftlog.node.messaging.transaction_checkers import CheckerRegistry, CheckRequest
from raftlog.node.security.access import AccessPolicy
from raftlog.node.security.acl_check import AclCheck
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.services.transactions import TransactionCalls, check_message
from raftlog.node.transaction_path import EndOutcome, EndTransaction
from raftlog.node.write_path import ClusterView, WritePath
from raftlog.proto import client_pb2
from raftlog.store.access_rules import AccessRules
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message import Message
from raftlog.store.message_store import PutResult
from tests.unit.node.messaging.test_rewrite import record_of

HALF_ID = "7F00000100002A9F0000000000000064"


@dataclass
class FakePath:
    outcome: EndOutcome
    asked: list[EndTransaction] = field(default_factory=list)
    checkers: CheckerRegistry = field(default_factory=CheckerRegistry)

    def end_transaction(self, request: EndTransaction, *, timeout_s: float) -> EndOutcome:
        self.asked.append(request)
        return self.outcome


class LeaderView:
    def __init__(self, role: str = "leader") -> None:
        self.role = role

    def cluster_view(self) -> ClusterView:
        return ClusterView("c", "n1", self.role, "n2", "n2:1", 3, 0, 0, 0, [], None)


def calls(path: FakePath | None, role: str = "leader") -> TransactionCalls:
    return TransactionCalls(cast(WritePath, LeaderView(role)), ServiceLimits(), path)


def half_request(**changes: Any) -> client_pb2.ProduceRequest:
    request = client_pb2.ProduceRequest(
        topic="orders",
        messages=[client_pb2.ProduceMessage(body=b"x", uniq_key="TX1")],
        transaction_group="payments",
    )
    for name, value in changes.items():
        if name == "messages":
            del request.messages[:]
            request.messages.extend(value)
        else:
            setattr(request, name, value)
    return request


def end_request(**changes: Any) -> client_pb2.EndTransactionRequest:
    fields: dict[str, Any] = {
        "producer_group": "payments",
        "topic": "orders",
        "transaction_id": "TX1",
        "msg_id": HALF_ID,
        "resolution": client_pb2.TRANSACTION_RESOLUTION_COMMIT,
    }
    fields.update(changes)
    return client_pb2.EndTransactionRequest(**fields)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"transaction_group": "bad group"}, "characters outside"),
        ({"messages": []}, "exactly one message"),
        ({"messages": [client_pb2.ProduceMessage(body=b"x", uniq_key="a")] * 2}, "exactly one"),
        ({"delay_level": 2}, "cannot have a delay"),
        ({"messages": [client_pb2.ProduceMessage(body=b"x")]}, "needs a uniq_key"),
    ],
)
def test_a_malformed_half_is_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        calls(FakePath(EndOutcome(True, False))).check_half(half_request(**changes))


def test_a_node_without_transactions_refuses_every_transactional_call() -> None:
    master_slave = calls(None)
    for call in (
        lambda: master_slave.check_half(half_request()),
        lambda: master_slave.end_transaction(end_request(), 1.0),
    ):
        with pytest.raises(InvalidRequestError, match="replication = raft"):
            call()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"resolution": client_pb2.TRANSACTION_RESOLUTION_UNSPECIFIED}, "COMMIT or ROLLBACK"),
        ({"transaction_id": ""}, "transaction_id is empty"),
        ({"msg_id": "nope"}, "hex"),
        ({"topic": HALF_TOPIC}, "written only by the node"),
        ({"producer_group": ""}, "group is empty"),
    ],
)
def test_a_malformed_end_is_refused(changes: dict[str, Any], message: str) -> None:
    path = FakePath(EndOutcome(True, False))
    with pytest.raises(InvalidRequestError, match=message):
        calls(path).end_transaction(end_request(**changes), 1.0)
    assert path.asked == []


def test_an_end_is_answered_with_the_recorded_decision() -> None:
    stored = PutResult(queue_offset=4, physical_offset=900, msg_id="M")
    path = FakePath(EndOutcome(True, False, stored, queue_id=2))
    response = calls(path).end_transaction(end_request(from_check=True), 1.0)
    assert path.asked == [EndTransaction("payments", "orders", "TX1", HALF_ID, True, True)]
    assert response.resolution == client_pb2.TRANSACTION_RESOLUTION_COMMIT
    assert not response.duplicate
    assert (response.result.queue_id, response.result.queue_offset, response.result.msg_id) == (
        2,
        4,
        "M",
    )
    path.outcome = EndOutcome(False, True)
    response = calls(path).end_transaction(end_request(), 1.0)
    assert response.resolution == client_pb2.TRANSACTION_RESOLUTION_ROLLBACK
    assert response.duplicate and not response.HasField("result")
    path.outcome = EndOutcome(False, True, decision_known=False)
    response = calls(path).end_transaction(end_request(), 1.0)
    assert response.resolution == client_pb2.TRANSACTION_RESOLUTION_UNSPECIFIED


class FakeContext:
    def __init__(self, active_calls: int = 3) -> None:
        self.active_calls = active_calls
        self.aborted: tuple[Any, str] | None = None
        self.metadata: Any = ()

    def is_active(self) -> bool:
        self.active_calls -= 1
        return self.active_calls >= 0

    def set_trailing_metadata(self, metadata: Any) -> None:
        self.metadata = metadata

    def abort(self, code: Any, details: str) -> None:
        self.aborted = (code, details)
        raise RuntimeError("aborted")

    def invocation_metadata(self) -> Any:
        return (("authorization", "Bearer secret"),)


def test_a_check_stream_registers_sends_checks_and_detaches() -> None:
    path = FakePath(EndOutcome(True, False))
    half = to_half(Message("orders", 1, b"x", uniq_key="TX1", properties=(("app", "y"),)), "g")
    record = record_of(half)
    request = client_pb2.TransactionChecksRequest(
        producer_group="g", client_id="host@1", topics=["orders"]
    )
    stream = calls(path).checks(request, cast(grpc.ServicerContext, FakeContext()))
    assert not next(stream).HasField("message")  # registered
    assert path.checkers.live("g", "orders") == 1
    info = HalfMessage(4, 100, 0, "TX1", "g", "orders", 1)
    assert path.checkers.offer(CheckRequest(record, info, 2))
    sent = next(stream)
    assert (sent.message.topic, sent.message.queue_id, sent.transaction_id, sent.check_times) == (
        "orders",
        1,
        "TX1",
        2,
    )
    assert [(p.name, p.value) for p in sent.message.properties] == [
        ("app", "y"),
        ("TRAN_MSG", "true"),
    ]
    assert sent == check_message(CheckRequest(record, info, 2))
    assert list(stream) == []  # the call ended: detached
    assert path.checkers.live("g", "orders") == 0


def test_a_check_stream_ends_when_this_member_stops_leading() -> None:
    path = FakePath(EndOutcome(True, False))
    request = client_pb2.TransactionChecksRequest(
        producer_group="g", client_id="host@1", topics=["orders"]
    )
    context = FakeContext()
    with pytest.raises(RuntimeError):
        list(calls(path, role="follower").checks(request, cast(grpc.ServicerContext, context)))
    assert context.aborted is not None
    assert context.aborted[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert ("raftlog-leader", "n2:1") in context.metadata


def test_access_control_checks_the_stream_before_it_starts(tmp_path: Any) -> None:
    rules = AccessRules(OsFileSystem(), str(tmp_path))
    rules.change("alice", "orders", ["produce"], revoke=False)
    check = AclCheck(AccessPolicy(rules, ()), lambda token: "alice", lambda: True)
    started: list[Any] = []

    def behavior(request: Any, context: Any) -> Any:
        started.append(request)
        return iter(())

    handler = grpc.unary_stream_rpc_method_handler(behavior)
    wrapped = check.wrap("/raftlog.v1.Producer/TransactionChecks", handler)
    allowed = client_pb2.TransactionChecksRequest(topics=["orders"])
    list(wrapped.unary_stream(allowed, FakeContext()))
    denied = client_pb2.TransactionChecksRequest(topics=["orders", "refunds"])
    context = FakeContext()
    with pytest.raises(RuntimeError):
        wrapped.unary_stream(denied, context)
    assert context.aborted is not None and "refunds" in context.aborted[1]
    assert started == [allowed]
