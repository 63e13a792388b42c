"""HandlerWrapper: the base of the node's server interceptors that wrap each method's handler
(request_guard.py, node/metrics/rpc_interceptor.py).

Rules this module keeps: a method's handler is wrapped once and the wrapped one reused while
the server resolves the same handler (gRPC asks the interceptor on every call); the cache is
bounded by the methods the services registered (an unknown method has no handler and is never
cached); a subclass says which handlers it wraps (``wants``) and how (``wrap``).
"""

from __future__ import annotations

from collections.abc import Callable

import grpc


class HandlerWrapper(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    def __init__(self) -> None:
        # method -> (the handler the server resolved, its wrapped twin).
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def wants(self, handler: grpc.RpcMethodHandler) -> bool:
        """Whether this interceptor wraps ``handler`` (default: every one)."""
        return True

    def wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        raise NotImplementedError

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or not self.wants(handler):
            return handler
        method: str = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self.wrap(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped
