"""The producer's in-flight window against a real gRPC server with the in-memory idempotent
Produce: several requests in flight, stored in order; the first request of a producer alone;
and a window settled correctly when requests reach the server out of order, fail, or have an
unknown outcome."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from raftlog.client import errors as e
from raftlog.client.producer import MAX_IN_FLIGHT_REQUESTS, Producer
from tests.unit.client.fake_server import FakeServer


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer().start()
    yield fake
    fake.stop()


class Recorder:
    """A Produce hook over the in-memory store: counts requests in flight at once, and may
    delay each request before it reaches the store (``delay_s(request)``)."""

    def __init__(self, server: FakeServer, delay_s: Any = lambda request: 0.0) -> None:
        self.state = server.produce_state
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0
        self.first_alone: bool | None = None
        self._delay_s = delay_s
        server.hooks["Produce"] = self.produce

    def produce(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self._delay_s(request))
            response, code = self.state.produce(request)
            if code:
                context.abort(getattr(grpc.StatusCode, code), code.lower())
            return response
        finally:
            with self.lock:
                self.in_flight -= 1


def send_all(p: Producer, bodies: list[bytes]) -> list[Any]:
    futures = [p.send_async("t", body) for body in bodies]
    return [f.result(timeout=30) for f in futures]


def assert_stored_once_in_order(server: FakeServer, bodies: list[bytes]) -> None:
    stored = server.produce_state.stored
    assert [body for _, _, body in stored] == bodies
    sequences = [seq for _, seq, _ in stored]
    assert sequences == sorted(sequences)
    assert sorted(set(sequences)) == list(range(1, max(sequences) + 1))


def bodies_of(count: int) -> list[bytes]:
    return [b"m%d" % i for i in range(count)]


def test_several_requests_are_in_flight_and_stored_in_order(server: FakeServer) -> None:
    recorder = Recorder(server, delay_s=lambda request: 0.02)
    bodies = bodies_of(3000)
    with Producer([server.address], timeout_s=10) as p:
        results = send_all(p, bodies)
    assert [r.queue_offset for r in results] == list(range(len(bodies)))
    assert_stored_once_in_order(server, bodies)
    assert 1 < recorder.most_in_flight <= 5


def test_the_window_size_is_the_callers(server: FakeServer) -> None:
    recorder = Recorder(server, delay_s=lambda request: 0.02)
    with Producer([server.address], timeout_s=10, max_in_flight_requests=1) as p:
        send_all(p, bodies_of(2000))
    assert recorder.most_in_flight == 1
    for bad in (0, MAX_IN_FLIGHT_REQUESTS + 1):
        with pytest.raises(ValueError, match="max_in_flight_requests"):
            Producer([server.address], max_in_flight_requests=bad)


def test_a_new_producers_first_request_goes_alone(server: FakeServer) -> None:
    """A node takes any number as an unknown producer's first: a second request that
    overtook the first would be stored as the first, so nothing joins it until it is
    answered."""
    arrived: list[int] = []

    def slow_first(request: Any) -> float:
        arrived.append(request.sequence)
        return 0.3 if request.sequence == 1 else 0.0

    Recorder(server, delay_s=slow_first)
    with Producer([server.address], timeout_s=10) as p:
        first = p.send_async("t", b"first")
        time.sleep(0.05)  # the first request is in flight; these queue behind it
        rest = [p.send_async("t", b"r%d" % i) for i in range(50)]
        first.result(timeout=10)
        assert arrived == [1]
        for future in rest:
            future.result(timeout=10)
    assert_stored_once_in_order(server, [b"first"] + [b"r%d" % i for i in range(50)])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_requests_reaching_a_strict_server_out_of_order_are_resent_in_order(
    server: FakeServer, seed: int
) -> None:
    """A server that refuses a gap at once (no wait for early batches, as a master-slave
    master): overtaken requests fail, and the window resends them in order."""
    server.produce_state.early_wait_s = 0.0
    rng = random.Random(seed)
    recorder = Recorder(server, delay_s=lambda request: rng.uniform(0.0, 0.03))
    bodies = bodies_of(2000)
    with Producer([server.address], timeout_s=20) as p:
        results = send_all(p, bodies)
    assert not any(r.duplicate for r in results)
    assert_stored_once_in_order(server, bodies)
    assert recorder.most_in_flight > 1


def test_an_unknown_outcome_inside_the_window_stores_every_message_once(
    server: FakeServer,
) -> None:
    """Every third request (from the second on) is stored but its answer is lost
    (DEADLINE_EXCEEDED): the resend with the same number is answered as a duplicate, and
    nothing is stored twice. (3,000 messages are at least 6 requests of at most 512.)"""
    state = server.produce_state
    lost: set[int] = set()

    def produce(request: Any, context: Any) -> Any:
        time.sleep(0.01)
        response, code = state.produce(request)
        if code:
            context.abort(getattr(grpc.StatusCode, code), code.lower())
        if request.sequence % 3 == 2 and request.sequence not in lost:
            lost.add(request.sequence)
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "commit not learnt in time")
        return response

    server.hooks["Produce"] = produce
    bodies = bodies_of(3000)
    with Producer([server.address], timeout_s=20) as p:
        results = send_all(p, bodies)
    assert lost
    assert [r.queue_offset for r in results] == list(range(len(bodies)))
    assert_stored_once_in_order(server, bodies)


def test_a_refused_request_inside_the_window_fails_alone(server: FakeServer) -> None:
    state = server.produce_state

    def produce(request: Any, context: Any) -> Any:
        time.sleep(0.01)
        if any(m.body == b"bad" for m in request.messages):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "body is bad")
        response, code = state.produce(request)
        if code:
            context.abort(getattr(grpc.StatusCode, code), code.lower())
        return response

    server.hooks["Produce"] = produce
    bodies = bodies_of(1500)
    bodies[700] = b"bad"
    with Producer([server.address], timeout_s=20) as p:
        futures = [p.send_async("t", body) for body in bodies]
        outcomes = []
        for future in futures:
            try:
                outcomes.append(future.result(timeout=30).queue_offset)
            except e.InvalidArgumentError:
                outcomes.append(None)
    assert outcomes.count(None) == 1 and outcomes[700] is None
    good = [body for body in bodies if body != b"bad"]
    assert_stored_once_in_order(server, good)


def test_flush_and_close_wait_for_the_whole_window(server: FakeServer) -> None:
    Recorder(server, delay_s=lambda request: 0.05)
    bodies = bodies_of(1000)
    p = Producer([server.address], timeout_s=10)
    futures = [p.send_async("t", body) for body in bodies]
    p.flush(timeout_s=20)
    assert all(f.done() for f in futures)
    more = [p.send_async("t", b"late%d" % i) for i in range(300)]
    p.close()
    assert all(f.done() and f.exception() is None for f in more)
    assert len(server.produce_state.stored) == 1300


def test_a_window_to_an_unavailable_cluster_fails_within_a_few_timeouts(server: FakeServer) -> None:
    """Every request after the first answered UNAVAILABLE (nothing written): the whole
    window fails after about two timeouts (its own, and one resend of an unknown outcome),
    not one per request."""
    state = server.produce_state
    answered = [0]

    def produce(request: Any, context: Any) -> Any:
        time.sleep(0.01)
        if answered[0]:
            context.abort(grpc.StatusCode.UNAVAILABLE, "no leader")
        answered[0] += 1
        response, _ = state.produce(request)
        return response

    server.hooks["Produce"] = produce
    with Producer([server.address], timeout_s=1.0) as p:
        p.send("t", b"first")
        began = time.monotonic()
        futures = [p.send_async("t", b"m%d" % i) for i in range(1000)]
        errors = {type(f.exception(timeout=30)) for f in futures}
        took_s = time.monotonic() - began
    # (UNAVAILABLE is retried to the total timeout; an attempt cut by that deadline is an
    # unknown outcome.)
    assert errors <= {e.UnavailableError, e.UnknownOutcomeError}
    assert took_s < 6.0
    assert [body for _, _, body in state.stored] == [b"first"]
