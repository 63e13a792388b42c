"""A tiny real gRPC server on 127.0.0.1 for client tests: scripted answers and an in-memory
idempotent Produce that keeps the sequence rules of client.proto."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc

from raftlog.proto import client_pb2, client_pb2_grpc, errors_pb2

Hook = Callable[[Any, Any], Any]


def not_leader_trailers(leader_address: str, term: int = 1) -> tuple[tuple[str, Any], ...]:
    detail = errors_pb2.NotLeader(leader_id="n9", leader_address=leader_address, term=term)
    status = errors_pb2.RpcStatus(code=grpc.StatusCode.FAILED_PRECONDITION.value[0])
    any_detail = status.details.add()
    any_detail.Pack(detail)
    return (
        ("raftlog-leader", leader_address),
        ("grpc-status-details-bin", status.SerializeToString()),
    )


@dataclass
class ProduceState:
    """In-memory idempotent Produce: per producer the last sequence and stored results."""

    stored: list[tuple[str, int, bytes]] = field(default_factory=list)  # (producer, seq, body)
    last_sequence: dict[str, int] = field(default_factory=dict)
    results: dict[tuple[str, int], Any] = field(default_factory=dict)
    lock: threading.Condition = field(default_factory=threading.Condition)
    # As a node: a batch a few numbers ahead waits this long for its predecessors.
    early_wait_s: float = 0.5

    def produce(self, request: Any) -> tuple[Any, str]:
        """The response and "" or the status the sequence rules give."""
        with self.lock:
            producer, seq = request.producer_id, request.sequence
            if producer and producer in self.last_sequence:
                self.lock.wait_for(
                    lambda: seq <= self.last_sequence[producer] + 1, timeout=self.early_wait_s
                )
            last = self.last_sequence.get(producer, 0)
            if producer and seq <= last:
                previous = self.results.get((producer, seq))
                if previous is None:
                    return None, "ALREADY_EXISTS"
                response = client_pb2.ProduceResponse()
                response.CopyFrom(previous)
                response.duplicate = True
                return response, ""
            if producer and seq != last + 1:
                return None, "OUT_OF_RANGE"
            response = client_pb2.ProduceResponse(store_timestamp_ms=int(time.time() * 1000))
            for message in request.messages:
                offset = len(self.stored)
                self.stored.append((producer, seq, message.body))
                response.results.add(
                    queue_id=0, queue_offset=offset, physical_offset=offset * 100, msg_id="X"
                )
            if producer:
                self.last_sequence[producer] = seq
                self.results[(producer, seq)] = response
                self.lock.notify_all()
            return response, ""


class FakeServer:
    """Admin, Producer and Consumer servicers whose methods call ``hooks[name]`` when set,
    else a default. Start with ``start()``; ``address`` is 127.0.0.1:<free port>."""

    def __init__(self) -> None:
        self.hooks: dict[str, Hook] = {}
        self.calls: list[str] = []
        self.produce_state = ProduceState()
        # A consumer also reads its group's retry topic: the fake has none unless told to.
        self.retry_topics = False
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        outer = self

        def method(name: str) -> Hook:
            def handler(_self: Any, request: Any, context: Any) -> Any:
                outer.calls.append(name)
                retry = str(getattr(request, "topic", "")).startswith("%RETRY%")
                if retry and not outer.retry_topics:
                    context.abort(grpc.StatusCode.NOT_FOUND, "no retry topic here")
                hook = outer.hooks.get(name)
                if hook is None:
                    context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name} not scripted")
                return hook(request, context)

            return handler

        def servicer(base: type) -> Any:
            names = [n for n in dir(base) if n[0].isupper()]
            return type("Fake" + base.__name__, (base,), {n: method(n) for n in names})()

        client_pb2_grpc.add_AdminServicer_to_server(
            servicer(client_pb2_grpc.AdminServicer), self._server
        )
        client_pb2_grpc.add_ProducerServicer_to_server(
            servicer(client_pb2_grpc.ProducerServicer), self._server
        )
        client_pb2_grpc.add_ConsumerServicer_to_server(
            servicer(client_pb2_grpc.ConsumerServicer), self._server
        )
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{port}"

    def start(self) -> FakeServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=0).wait(5)

    def default_produce(self) -> None:
        """Answer Produce with the in-memory idempotent store."""

        def produce(request: Any, context: Any) -> Any:
            response, code = self.produce_state.produce(request)
            if code:
                context.abort(getattr(grpc.StatusCode, code), code.lower())
            return response

        self.hooks["Produce"] = produce


def abort_with(code: grpc.StatusCode, message: str, trailers: Any = ()) -> Hook:
    def hook(request: Any, context: Any) -> Any:
        if trailers:
            context.set_trailing_metadata(trailers)
        context.abort(code, message)

    return hook
