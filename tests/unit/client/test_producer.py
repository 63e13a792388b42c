"""Producer against a real gRPC server with an in-memory idempotent Produce: ordering of
async sends, retries of unknown outcomes, and resending an unresolved batch first."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from raftlog.client import errors as e
from raftlog.client.messages import OutgoingMessage
from raftlog.client.producer import Producer
from tests.unit.client.fake_server import FakeServer


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer().start()
    fake.default_produce()
    yield fake
    fake.stop()


def producer(server: FakeServer, **kwargs: Any) -> Producer:
    kwargs.setdefault("timeout_s", 3.0)
    kwargs.setdefault("max_attempts", 4)
    return Producer([server.address], **kwargs)


def test_send_returns_result_and_fills_uniq_key(server: FakeServer) -> None:
    with producer(server) as p:
        result = p.send("t", b"hello", key="k1", tags="a", properties={"x": "y"})
    assert result.queue_offset == 0
    assert result.topic == "t"
    assert not result.duplicate
    assert len(result.uniq_key) == 32
    assert server.produce_state.stored == [(p.producer_id, 1, b"hello")]


def test_async_sends_are_stored_in_sequence_order(server: FakeServer) -> None:
    with producer(server) as p:
        futures = [p.send_async("t", str(i).encode()) for i in range(200)]
        results = [f.result(timeout=10) for f in futures]
    assert [r.queue_offset for r in results] == list(range(200))
    stored = server.produce_state.stored
    assert_gapless_in_order([seq for _, seq, _ in stored], 200)
    assert [body for _, _, body in stored] == [str(i).encode() for i in range(200)]
    # Sends queued behind each other went in fewer requests (coalesced), in order.
    assert len({seq for _, seq, _ in stored}) < 200


def assert_gapless_in_order(sequences: list[int], message_count: int) -> None:
    """One sequence per request, requests stored in order without a gap (several sends may
    share a request, hence a sequence, when the producer coalesced them)."""
    assert len(sequences) == message_count
    assert sequences == sorted(sequences)
    assert sorted(set(sequences)) == list(range(1, max(sequences) + 1))


def test_async_sends_from_many_threads_keep_sequence_order(server: FakeServer) -> None:
    with producer(server) as p:
        threads = [
            threading.Thread(target=lambda: [p.send("t", b"x") for _ in range(25)])
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert_gapless_in_order([seq for _, seq, _ in server.produce_state.stored], 100)


def test_sync_and_async_sends_mixed_across_threads_keep_each_threads_order(
    server: FakeServer,
) -> None:
    # Sync sends go from the caller's thread when nothing is queued, async ones through the
    # sender thread: both paths share one order.
    def run(p: Producer, name: str) -> None:
        for i in range(30):
            body = f"{name}-{i:02d}".encode()
            if i % 3:
                p.send("t", body)
            else:
                p.send_async("t", body)

    with producer(server) as p:
        threads = [threading.Thread(target=run, args=(p, f"w{k}")) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        p.flush(10)
    stored = server.produce_state.stored
    assert_gapless_in_order([seq for _, seq, _ in stored], 120)
    for k in range(4):
        mine = [body for _, _, body in stored if body.startswith(f"w{k}-".encode())]
        assert mine == sorted(mine) and len(mine) == 30


def refuse_bad_bodies(server: FakeServer) -> None:
    """Produce refuses (INVALID_ARGUMENT, nothing stored) any request holding a b"bad" body."""
    state = server.produce_state

    def produce(request: Any, context: Any) -> Any:
        if any(m.body == b"bad" for m in request.messages):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "body is bad")
        response, code = state.produce(request)
        if code:
            context.abort(getattr(grpc.StatusCode, code), code)
        return response

    server.hooks["Produce"] = produce


def test_a_bad_send_coalesced_with_good_ones_fails_alone(server: FakeServer) -> None:
    state = server.produce_state
    refuse_bad_bodies(server)
    with producer(server) as p:
        blocker = p.send_async("t", b"first")  # while it is in flight the rest queue up
        futures = [p.send_async("t", body) for body in (b"a", b"bad", b"b")]
        blocker.result(timeout=10)
        outcomes = []
        for future in futures:
            try:
                outcomes.append(future.result(timeout=10).queue_offset)
            except e.InvalidArgumentError:
                outcomes.append(None)
    assert outcomes[1] is None
    assert outcomes[0] is not None and outcomes[2] is not None
    assert [body for _, _, body in state.stored] == [b"first", b"a", b"b"]


def test_batch_is_one_sequence(server: FakeServer) -> None:
    with producer(server) as p:
        results = p.send_batch("t", [b"a", OutgoingMessage(body=b"b", queue_id=0)])
    assert [r.queue_offset for r in results] == [0, 1]
    assert [seq for _, seq, _ in server.produce_state.stored] == [1, 1]


def lose_first_answer(server: FakeServer, *, store: bool) -> None:
    """The first Produce (optionally stored) answers DEADLINE_EXCEEDED: an unknown outcome."""
    state = server.produce_state
    first = [True]

    def produce(request: Any, context: Any) -> Any:
        if first[0]:
            first[0] = False
            if store:
                state.produce(request)
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "commit not learnt in time")
        response, code = state.produce(request)
        if code:
            context.abort(getattr(grpc.StatusCode, code), code)
        return response

    server.hooks["Produce"] = produce


def test_idempotent_retry_of_unknown_outcome_stores_once(server: FakeServer) -> None:
    lose_first_answer(server, store=True)
    with producer(server) as p:
        result = p.send("t", b"once")
    assert result.duplicate
    assert server.produce_state.stored == [(p.producer_id, 1, b"once")]


def test_non_idempotent_surfaces_unknown_outcome(server: FakeServer) -> None:
    lose_first_answer(server, store=True)
    with producer(server, idempotent=False) as p, pytest.raises(e.UnknownOutcomeError):
        p.send("t", b"maybe")
    assert server.produce_state.stored == [("", 0, b"maybe")]
    assert server.calls.count("Produce") == 1


@pytest.mark.parametrize("stored_first", [True, False])
def test_unresolved_batch_is_resent_before_the_next(server: FakeServer, stored_first: bool) -> None:
    """Batch 1's outcome stays unknown (answer lost, then no leader until the retries run
    out). The next send resends batch 1 with its sequence first, then sends batch 2."""
    state = server.produce_state
    healthy = threading.Event()
    first = [True]

    def produce(request: Any, context: Any) -> Any:
        if first[0]:
            first[0] = False
            if stored_first:
                state.produce(request)
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "lost")
        if not healthy.is_set():
            context.abort(grpc.StatusCode.UNAVAILABLE, "no leader")
        response, code = state.produce(request)
        if code:
            context.abort(getattr(grpc.StatusCode, code), code)
        return response

    server.hooks["Produce"] = produce
    with producer(server, timeout_s=0.5) as p:
        with pytest.raises(e.UnknownOutcomeError):
            p.send("t", b"one")
        healthy.set()
        second = p.send("t", b"two")
    assert [(seq, body) for _, seq, body in state.stored] == [(1, b"one"), (2, b"two")]
    assert second.queue_offset == 1
    assert not second.duplicate


def test_refused_batch_gives_its_sequence_back(server: FakeServer) -> None:
    state = server.produce_state
    refuse_bad_bodies(server)
    with producer(server) as p:
        with pytest.raises(e.InvalidArgumentError):
            p.send("t", b"bad")
        p.send("t", b"good")
    assert [seq for _, seq, _ in state.stored] == [1]  # no gap: "good" reused sequence 1


def test_out_of_range_without_earlier_batch_is_surfaced(server: FakeServer) -> None:
    with producer(server, first_sequence=5) as p, pytest.raises(e.SequenceGapError):
        p.send("t", b"x")
    assert server.produce_state.stored == []


def test_forgotten_sequence_is_surfaced_as_stored(server: FakeServer) -> None:
    server.produce_state.last_sequence["fixed"] = 3
    with producer(server, producer_id="fixed", first_sequence=2) as p:
        with pytest.raises(e.SequenceForgottenError, match="stored exactly once"):
            p.send("t", b"x")
        assert p.next_sequence == 3


def test_redirect_to_leader(server: FakeServer) -> None:
    follower = FakeServer().start()
    try:
        from tests.unit.client.fake_server import abort_with, not_leader_trailers

        follower.hooks["Produce"] = abort_with(
            grpc.StatusCode.FAILED_PRECONDITION, "not leader", not_leader_trailers(server.address)
        )
        with Producer([follower.address], timeout_s=3) as p:
            p.send("t", b"x")
            p.send("t", b"y")
        assert follower.calls == ["Produce"]
        assert len(server.produce_state.stored) == 2
    finally:
        follower.stop()


def test_close_is_idempotent_and_refuses_new_sends(server: FakeServer) -> None:
    p = producer(server)
    future = p.send_async("t", b"x")
    p.flush(5)
    assert future.done()
    p.close()
    p.close()
    with pytest.raises(e.RaftlogError, match="closed"):
        p.send_async("t", b"y")


def test_argument_checks(server: FakeServer) -> None:
    with pytest.raises(ValueError, match="producer_id"):
        Producer([server.address], idempotent=False, producer_id="x")
    with pytest.raises(ValueError, match="at most one"):
        OutgoingMessage(body=b"", queue_id=1, sharding_key="k")
    with producer(server) as p, pytest.raises(ValueError, match="at most one"):
        p.send_async("t", b"x", queue_id=1, sharding_key="k")
    with producer(server) as p, pytest.raises(ValueError, match="at least one"):
        p.send_batch("t", [])


def test_delays_travel_with_their_batch_and_never_coalesce(server: FakeServer) -> None:
    seen: list[tuple[int, int, int]] = []

    def produce(request: Any, context: Any) -> Any:
        response, code = server.produce_state.produce(request)
        if code:
            context.abort(getattr(grpc.StatusCode, code), code.lower())
        seen.append((request.delay_level, request.deliver_at_ms, len(request.messages)))
        return response

    server.hooks["Produce"] = produce
    with producer(server) as p:
        p.send("t", b"a", delay_level=3)
        futures = [p.send_async("t", b"b", deliver_at_ms=5_000) for _ in range(20)]
        futures += [p.send_async("t", b"c", delay_level=2) for _ in range(20)]
        futures.append(p.send_async("t", b"d"))
        for future in futures:
            future.result(timeout=10)
    assert seen[0] == (3, 0, 1)
    assert sum(n for _, _, n in seen) == 42
    # Sends coalesce only with sends of the same delay.
    by_delay = {(level, at): 0 for level, at, _ in seen}
    for level, at, count in seen:
        by_delay[(level, at)] += count
    assert by_delay == {(3, 0): 1, (0, 5_000): 20, (2, 0): 20, (0, 0): 1}
    with producer(server) as p, pytest.raises(ValueError, match="at most one"):
        p.send("t", b"x", delay_level=1, deliver_at_ms=1)
