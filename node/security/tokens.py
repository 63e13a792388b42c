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
- The file reloads without a restart, as the TLS files do (node/security/tls.py): at most
  once a second (a monotonic-clock throttle), a call looks at the file's modification time,
  size and inode, and re-reads it when one changed. A line removed revokes that client for
  new calls (calls already admitted run on). A new version that cannot be read or is
  malformed is logged in one warning line (never a token) and the previous tokens stay,
  until the file changes again.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from raftlog.node.config import ConfigError

_log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16
# How often, at most, a call looks at the file for a change.
RELOAD_CHECK_INTERVAL_S = 1.0
_OPEN_PREFIX = "/grpc.health.v1.Health/"
_BEARER = "bearer "

# What tells one version of the file from another: (st_mtime_ns, st_size, st_ino).
_Stamp = tuple[int, int, int]


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


def _stamp(path: str) -> _Stamp:
    status = os.stat(path)
    return (status.st_mtime_ns, status.st_size, status.st_ino)


class TokenFile:
    """The tokens of ``auth_tokens_file``, read at once (ConfigError on a malformed file, which
    refuses the start) and again whenever the file changes (see the module rules)."""

    def __init__(
        self,
        path: str,
        *,
        check_interval_s: float = RELOAD_CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._check_interval_s = check_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        # The stamp is taken before the read: a change made during the read differs from it,
        # so the next check reads the file again.
        self._stamp: _Stamp | None = self._stamp_or_none()
        self._clients = load_tokens(path)
        self._known = _encoded(self._clients)
        self._checked_at_s = clock()

    def _stamp_or_none(self) -> _Stamp | None:
        try:
            return _stamp(self.path)
        except OSError:
            return None

    def clients(self) -> tuple[tuple[str, bytes], ...]:
        """(client name, token in UTF-8) of every known client, after a reload when the file
        changed; cheap between checks (one clock read), and never blocked by another call's
        reload."""
        if self._clock() - self._checked_at_s < self._check_interval_s:
            return self._known
        if not self._lock.acquire(blocking=False):
            return self._known  # another call is checking right now
        try:
            if self._clock() - self._checked_at_s >= self._check_interval_s:
                self._reload_if_changed()
                self._checked_at_s = self._clock()
        finally:
            self._lock.release()
        return self._known

    def _reload_if_changed(self) -> None:
        stamp = self._stamp_or_none()
        if stamp == self._stamp:
            return
        # Remembered even when this version is bad: it is reported once, not every second.
        self._stamp = stamp
        try:
            clients = load_tokens(self.path)
        except ConfigError as error:
            _log.warning(
                "client tokens not reloaded (the previous ones stay, %d clients): %s",
                len(self._clients),
                error,
            )
            return
        added = sorted(set(clients) - set(self._clients))
        removed = sorted(set(self._clients) - set(clients))
        changed = sorted(
            name
            for name in set(clients) & set(self._clients)
            if clients[name] != self._clients[name]
        )
        self._clients = clients
        self._known = _encoded(clients)
        _log.info(
            "client tokens reloaded from %s: %d clients; added: %s; removed: %s; new token: %s",
            self.path,
            len(clients),
            ", ".join(added) or "none",
            ", ".join(removed) or "none",
            ", ".join(changed) or "none",
        )


def _encoded(clients: dict[str, str]) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, token.encode()) for name, token in clients.items())


class TokenCheck(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses client-port calls without a known bearer token (see the module rules); the
    tokens are ``tokens``' current ones at each call."""

    def __init__(self, tokens: TokenFile) -> None:
        self._tokens = tokens

    def client_of(self, presented: str) -> str | None:
        """The name of the client whose token ``presented`` is; None for an unknown one."""
        given = presented.encode()
        found = None
        # Every token is compared, so the time does not depend on which one matched.
        for name, token in self._tokens.clients():
            if hmac.compare_digest(given, token):
                found = name
        return found

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None or details.method.startswith(_OPEN_PREFIX):
            return handler
        metadata = dict(details.invocation_metadata or ())
        header = str(metadata.get("authorization", ""))
        if header[: len(_BEARER)].lower() == _BEARER and (
            self.client_of(header[len(_BEARER) :]) is not None
        ):
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
