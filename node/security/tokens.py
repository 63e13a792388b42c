"""Client authentication by bearer token on the client port (``auth_tokens_file``).

The file holds one client per line, ``name:token`` (blank lines and ``#`` comments are
skipped). With it set, every call on the client port must carry the metadata
``authorization: Bearer <token>`` of one of them; a call without one, or with another,
answers UNAUTHENTICATED before any service sees it.

Rules this module keeps:
- The token never travels on a command line: it is read from the file (0600 is advised;
  docs/security.md), and no message or log line ever contains one.
- Comparisons take the same time whatever the token (``hmac.compare_digest`` against every
  known token), so timing does not tell how much of a guess was right.
- The health service stays open (orchestrators' probes carry no token); reflection is
  covered like the other services. The peer port is not this module's: mTLS guards it.
- A malformed file refuses the node's start with one line naming the file and the line.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from raftlog.node.config import ConfigError

MIN_TOKEN_CHARS = 16
_OPEN_PREFIX = "/grpc.health.v1.Health/"
_BEARER = "bearer "


def load_tokens(path: str) -> dict[str, str]:
    """Client name -> token, from ``path``; ConfigError naming the line on a bad one."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"auth_tokens_file: cannot read {path}: {error}") from None
    tokens: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, sep, token = text.partition(":")
        where = f"auth_tokens_file: {path} line {number}"
        if not sep or not name.strip():
            raise ConfigError(f"{where}: expected name:token")
        if len(token.strip()) < MIN_TOKEN_CHARS:
            raise ConfigError(f"{where}: the token is shorter than {MIN_TOKEN_CHARS} characters")
        if name.strip() in tokens:
            raise ConfigError(f"{where}: client {name.strip()!r} is listed twice")
        tokens[name.strip()] = token.strip()
    if not tokens:
        raise ConfigError(f"auth_tokens_file: {path} lists no client")
    return tokens


class TokenCheck(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses client-port calls without a known bearer token (see the module rules)."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [token.encode() for token in tokens.values()]

    def _known(self, presented: str) -> bool:
        given = presented.encode()
        # Every token is compared, so the time does not depend on which one matched.
        return sum(hmac.compare_digest(given, token) for token in self._tokens) > 0

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None or details.method.startswith(_OPEN_PREFIX):
            return handler
        metadata = dict(details.invocation_metadata or ())
        header = str(metadata.get("authorization", ""))
        if header[: len(_BEARER)].lower() == _BEARER and self._known(header[len(_BEARER) :]):
            return handler
        reason = "a bearer token" if not header else "a known bearer token"
        return _refusing(handler, f"this node requires {reason} (authorization metadata)")


def _refusing(handler: Any, message: str) -> Any:
    """A handler of the same shape as ``handler`` that answers UNAUTHENTICATED."""

    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    kinds = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }
    make = kinds[(bool(handler.request_streaming), bool(handler.response_streaming))]
    return make(
        refuse,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
