"""What a node does with a request it cannot read: refuse it, log one short line at most.

A server built with ``RequestGuard`` among its interceptors answers a request whose bytes do
not parse as the method's message with INVALID_ARGUMENT (gRPC's own answer is INTERNAL, with
a traceback in the log); building one calls ``quiet_grpc_tracebacks``, which turns what
gRPC's server still logs with a traceback (a method a servicer does not implement, a handler
raising past its ``abort_on_error``) into the same kind of short line.

Rules this module keeps:
- Anything a client can cause is logged at most once per ``LOG_INTERVAL_S`` per method (or
  per gRPC logger), one line, never a traceback; the line says how many were suppressed since
  the last one, so a flood shows up without filling the disk.
- The guard wraps every handler a server has (client, health, reflection, peer services):
  unary and streaming requests alike; a malformed message in a stream ends that call only.
- Nothing here changes what a well-formed request does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from raftlog.node.services.handler_wrapper import HandlerWrapper

_LOGGER = logging.getLogger(__name__)
# One line per method (or logger) per this many seconds at most.
LOG_INTERVAL_S = 10.0
# gRPC's server-side loggers that log client-caused errors with a traceback.
_GRPC_LOGGERS = ("grpc._server", "grpc._common")


class RateLimitedLog:
    """Logs at most one line per key per ``interval_s``, counting the lines it suppressed."""

    def __init__(self, logger: logging.Logger, interval_s: float = LOG_INTERVAL_S) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._lock = threading.Lock()
        # key -> (when its last line was written, lines suppressed since)
        self._state: dict[str, tuple[float, int]] = {}

    def warning(self, key: str, message: str) -> bool:
        """Log ``key: message`` unless ``key`` logged within the interval; True if logged."""
        now = time.monotonic()
        with self._lock:
            last_s, suppressed = self._state.get(key, (float("-inf"), 0))
            if now - last_s < self._interval_s:
                self._state[key] = (last_s, suppressed + 1)
                return False
            self._state[key] = (now, 0)
        more = f" ({suppressed} more since the last line)" if suppressed else ""
        self._logger.warning("%s: %s%s", key, message, more)
        return True


class _Malformed:
    """What a request that did not parse is handed to the behavior as."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as error:  # a DecodeError, or anything a parser raises on bad bytes
            return _Malformed(error)

    return parse


class RequestGuard(HandlerWrapper):
    """The interceptor answering unparseable requests with INVALID_ARGUMENT."""

    def __init__(self) -> None:
        # What the guard cannot catch (it runs inside gRPC's call handling) is at least short.
        quiet_grpc_tracebacks()
        super().__init__()
        self._log = RateLimitedLog(_LOGGER)

    def _refuse(self, method: str, request: _Malformed, context: grpc.ServicerContext) -> None:
        self._log.warning(
            method, f"malformed request from {context.peer()} refused: {request.error}"
        )
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {request.error}")

    def wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        kind = ("stream" if handler.request_streaming else "unary") + (
            "_stream" if handler.response_streaming else "_unary"
        )
        behavior = getattr(handler, kind)

        def guarded_stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            return behavior(self._checked(method, requests, context), context)

        def guarded_unary(request: Any, context: grpc.ServicerContext) -> Any:
            if isinstance(request, _Malformed):
                self._refuse(method, request, context)
            return behavior(request, context)

        guarded = guarded_stream if handler.request_streaming else guarded_unary
        return handler._replace(
            request_deserializer=_tolerant(handler.request_deserializer), **{kind: guarded}
        )

    def _checked(
        self, method: str, requests: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        for request in requests:
            if isinstance(request, _Malformed):
                self._refuse(method, request, context)
            yield request


class _OneLine(logging.Filter):
    """Passes a gRPC server log record as one rate-limited line, without its traceback."""

    def __init__(self) -> None:
        super().__init__()
        self._log = RateLimitedLog(_LOGGER)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info is None:
            return True
        error = record.exc_info[1]
        self._log.warning(record.name, f"{record.getMessage()} ({type(error).__name__}: {error})")
        return False


_FILTER = _OneLine()


def quiet_grpc_tracebacks() -> None:
    """Install the one-line filter on gRPC's server loggers (idempotent)."""
    for name in _GRPC_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
