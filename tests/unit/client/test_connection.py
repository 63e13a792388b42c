"""Connection: redirects through the raftlog-leader trailer, skipping unavailable members."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from raftlog.client import errors as e
from raftlog.client.connection import Connection, parse_addresses
from raftlog.proto import client_pb2
from tests.unit.client.fake_server import FakeServer, abort_with, not_leader_trailers


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    fakes = [FakeServer().start() for _ in range(3)]
    yield fakes
    for fake in fakes:
        fake.stop()


def ok(request: object, context: object) -> object:
    return client_pb2.ListTopicsResponse(topics=[client_pb2.TopicInfo(name="t", queue_count=1)])


def call(connection: Connection, *, leader_only: bool = True) -> object:
    return connection.call(
        "Admin",
        "ListTopics",
        client_pb2.ListTopicsRequest(),
        timeout_s=5,
        leader_only=leader_only,
        write=True,
    )


def test_parse_addresses() -> None:
    assert parse_addresses("a:1, b:2,a:1") == ("a:1", "b:2")
    assert parse_addresses(["a:1"]) == ("a:1",)
    with pytest.raises(ValueError, match="host:port"):
        parse_addresses("a")
    with pytest.raises(ValueError, match="no server"):
        parse_addresses(" , ")


def test_follows_redirect_and_remembers_leader(servers: list[FakeServer]) -> None:
    first, _, leader = servers
    first.hooks["ListTopics"] = abort_with(
        grpc.StatusCode.FAILED_PRECONDITION, "not leader", not_leader_trailers(leader.address)
    )
    leader.hooks["ListTopics"] = ok
    with Connection([first.address]) as connection:
        assert call(connection).topics[0].name == "t"  # type: ignore[attr-defined]
        assert connection.leader_address == leader.address
        assert leader.address in connection.addresses  # learnt from the redirect
        call(connection)
    assert first.calls == ["ListTopics"]  # the second call went straight to the leader
    assert leader.calls == ["ListTopics", "ListTopics"]


def test_unavailable_tries_next_address(servers: list[FakeServer]) -> None:
    down, also_down, good = servers
    down.hooks["ListTopics"] = abort_with(grpc.StatusCode.UNAVAILABLE, "no leader")
    also_down.hooks["ListTopics"] = abort_with(grpc.StatusCode.FAILED_PRECONDITION, "not leader")
    good.hooks["ListTopics"] = ok
    with Connection([down.address, also_down.address, good.address]) as connection:
        call(connection)
        assert connection.leader_address == good.address


def test_redirect_loop_is_bounded(servers: list[FakeServer]) -> None:
    a, b, _ = servers
    a.hooks["ListTopics"] = abort_with(
        grpc.StatusCode.FAILED_PRECONDITION, "not leader", not_leader_trailers(b.address)
    )
    b.hooks["ListTopics"] = abort_with(
        grpc.StatusCode.FAILED_PRECONDITION, "not leader", not_leader_trailers(a.address)
    )
    with Connection([a.address], max_redirects=3) as connection, pytest.raises(e.NotLeaderError):
        call(connection)
    assert len(a.calls) + len(b.calls) <= 5


def test_stale_redirect_with_lower_term_is_ignored(servers: list[FakeServer]) -> None:
    a, b, c = servers
    with Connection([a.address]) as connection:
        connection.note_leader(b.address, term=5)
        connection.note_leader(c.address, term=4)
        assert connection.leader_address == b.address
        connection.note_leader(c.address, term=6)
        assert connection.leader_address == c.address


def test_definite_error_is_raised_at_once(servers: list[FakeServer]) -> None:
    a, b, _ = servers
    a.hooks["ListTopics"] = abort_with(grpc.StatusCode.INVALID_ARGUMENT, "bad topic")
    b.hooks["ListTopics"] = ok
    with Connection([a.address, b.address]) as connection, pytest.raises(e.InvalidArgumentError):
        call(connection)
    assert b.calls == []


def test_all_down_raises_unavailable() -> None:
    fake = FakeServer().start()
    address = fake.address
    fake.stop()
    with Connection([address]) as connection, pytest.raises(e.UnavailableError):
        call(connection)


def test_closed_connection_refuses_calls(servers: list[FakeServer]) -> None:
    connection = Connection([servers[0].address])
    connection.close()
    with pytest.raises(e.RaftlogError, match="closed"):
        call(connection)
