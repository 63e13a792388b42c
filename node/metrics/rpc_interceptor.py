"""RpcMetrics: a gRPC server interceptor that counts every unary call by method and status
code, times it, and counts the messages Produce stored and Pull returned.

Rules this module keeps:
- Only unary methods are wrapped (the whole client API, health checks). Streaming methods
  (the peers' Raft and HA streams, segment transfer) pass through untouched: they live as long
  as a connection, so neither a count nor a latency of them says anything, and their messages
  are the replication hot path.
- Label children are looked up once per method and cached with the wrapped handler, so a call
  costs two clock reads, one histogram observation and one or two counter increments.
- The code is the one the servicer set (``context.abort`` or ``set_code``), OK when it set
  none and returned; an exception without a code is UNKNOWN, as gRPC answers it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram

from raftlog.node.services.handler_wrapper import HandlerWrapper

# From a fast produce (sub-millisecond) to a long poll (Pull waits up to 30 s by default).
LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
_PRODUCE = "/raftlog.v1.Producer/Produce"
_PULL = "/raftlog.v1.Consumer/Pull"


def _produced(response: Any) -> int:
    """Messages an OK ProduceResponse stored (a duplicate stored nothing new)."""
    return 0 if response.duplicate else len(response.results)


def _pulled(response: Any) -> int:
    """Messages an OK PullResponse carries, in either form."""
    return int(response.record_count) or len(response.messages)


class RpcMetrics(HandlerWrapper):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__()
        self._handled = Counter(
            "raftlog_grpc_server_handled_total",
            "Unary gRPC calls answered, by method and status code",
            ["grpc_service", "grpc_method", "grpc_code"],
            registry=registry,
        )
        self._latency = Histogram(
            "raftlog_grpc_server_handling_seconds",
            "Time from a unary call's arrival to its answer (Pull: long-poll waits included)",
            ["grpc_service", "grpc_method"],
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        produced = Counter(
            "raftlog_produce_messages_total",
            "Messages stored by Produce calls answered OK (duplicates not counted)",
            registry=registry,
        )
        pulled = Counter(
            "raftlog_pull_messages_total",
            "Messages returned by Pull calls answered OK",
            registry=registry,
        )
        self._messages: dict[str, tuple[Counter, Callable[[Any], int]]] = {
            _PRODUCE: (produced, _produced),
            _PULL: (pulled, _pulled),
        }

    def wants(self, handler: grpc.RpcMethodHandler) -> bool:
        return not (handler.request_streaming or handler.response_streaming)

    def wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        service, _, name = method.lstrip("/").rpartition("/")
        latency = self._latency.labels(service, name)
        handled = self._handled
        codes: dict[grpc.StatusCode, Any] = {}
        messages = self._messages.get(method)
        behavior = handler.unary_unary

        def count(code: grpc.StatusCode) -> None:
            child = codes.get(code)
            if child is None:
                child = codes[code] = handled.labels(service, name, code.name)
            child.inc()

        def observed(request: Any, context: grpc.ServicerContext) -> Any:
            started_s = time.perf_counter()
            try:
                response = behavior(request, context)
            except BaseException:
                latency.observe(time.perf_counter() - started_s)
                count(context.code() or grpc.StatusCode.UNKNOWN)
                raise
            latency.observe(time.perf_counter() - started_s)
            code = context.code() or grpc.StatusCode.OK
            count(code)
            if messages is not None and code is grpc.StatusCode.OK:
                counter, how_many = messages
                counter.inc(how_many(response))
            return response

        return grpc.unary_unary_rpc_method_handler(
            observed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
