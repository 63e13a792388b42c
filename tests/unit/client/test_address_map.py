"""Connection(address_map=...): members are named by the cluster's addresses (what redirects
carry) and dialled at the mapped ones (a client outside Docker reaching published ports)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from raftlog.client import errors as e
from raftlog.client.connection import Connection
from raftlog.proto import client_pb2
from tests.unit.client.fake_server import FakeServer, abort_with, not_leader_trailers


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    fakes = [FakeServer().start() for _ in range(2)]
    yield fakes
    for fake in fakes:
        fake.stop()


def ok(request: object, context: object) -> object:
    return client_pb2.ListTopicsResponse(topics=[client_pb2.TopicInfo(name="t", queue_count=1)])


def test_redirect_to_an_unresolvable_name_is_dialled_through_the_map(
    servers: list[FakeServer],
) -> None:
    follower, leader = servers
    follower.hooks["ListTopics"] = abort_with(
        grpc.StatusCode.FAILED_PRECONDITION, "not leader", not_leader_trailers("n2:7701")
    )
    leader.hooks["ListTopics"] = ok
    address_map = {"n1:7701": follower.address, "n2:7701": leader.address}
    with Connection(["n1:7701"], address_map=address_map) as connection:
        answer = connection.call(
            "Admin",
            "ListTopics",
            client_pb2.ListTopicsRequest(),
            timeout_s=5,
            leader_only=True,
            write=False,
        )
        assert answer.topics[0].name == "t"
        # The belief keeps the cluster's name; only the channel uses the mapped address.
        assert connection.leader_address == "n2:7701"
        assert connection.addresses == ("n1:7701", "n2:7701")
    assert follower.calls == ["ListTopics"]
    assert leader.calls == ["ListTopics"]


def test_a_member_that_times_out_is_no_longer_believed_to_lead(
    servers: list[FakeServer],
) -> None:
    frozen, leader = servers

    def hang(request: object, context: object) -> object:
        time.sleep(1.0)
        return ok(request, context)

    frozen.hooks["ListTopics"] = hang
    leader.hooks["ListTopics"] = ok
    with Connection([frozen.address, leader.address]) as connection:
        connection.note_leader(frozen.address, term=1)
        with pytest.raises(e.UnknownOutcomeError):
            connection.call(
                "Admin",
                "ListTopics",
                client_pb2.ListTopicsRequest(),
                timeout_s=0.3,
                leader_only=True,
                write=True,
            )
        assert connection.leader_address is None
        assert connection.addresses == (leader.address, frozen.address)
        answer = connection.call(
            "Admin",
            "ListTopics",
            client_pb2.ListTopicsRequest(),
            timeout_s=5,
            leader_only=True,
            write=True,
        )
        assert answer.topics[0].name == "t"
    assert leader.calls == ["ListTopics"]
