"""BearerToken: the client side of token authentication (node/security/tokens.py): every call
of a Connection made with ``token=`` carries the metadata ``authorization: Bearer <token>``.

Rules this module keeps: the token is added to the calls' metadata only, never logged or put in
an error message; ``token_from_env`` reads RAFTLOG_TOKEN so a token need not be on a command
line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import grpc

ENV_TOKEN = "RAFTLOG_TOKEN"


def token_from_env(env: Mapping[str, str] = os.environ) -> str | None:
    """The token in RAFTLOG_TOKEN; None when unset or empty."""
    return env.get(ENV_TOKEN) or None


class _Details(grpc.ClientCallDetails):  # type: ignore[misc]
    def __init__(self, base: Any, metadata: list[tuple[str, str]]) -> None:
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = metadata
        self.credentials = base.credentials
        self.wait_for_ready = base.wait_for_ready
        self.compression = base.compression


class BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """Adds the token to every unary-request call (all the client's calls are)."""

    def __init__(self, token: str) -> None:
        if not token or any(c.isspace() for c in token):
            raise ValueError("token: empty, or holds white space")
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details: Any) -> _Details:
        return _Details(details, [*(details.metadata or ()), self._header])

    def intercept_unary_unary(
        self, continuation: Callable[[Any, Any], Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[[Any, Any], Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)
