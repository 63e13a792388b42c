"""A pool of gRPC channels to a cluster's members, and one call routed to the right member.

Rules this module keeps:
- Every channel allows messages of up to 64 MiB both ways (bodies may exceed gRPC's 4 MiB
  default: client.proto "Message sizes").
- Leader-only calls go to the member believed to lead; a FAILED_PRECONDITION answer moves the
  belief to the address in its ``raftlog-leader`` trailer and the call follows it (at most
  ``max_redirects`` times per call; a redirect with a lower term than one already followed is
  ignored as stale). A member that is unavailable (server-sent UNAVAILABLE, a not-leader answer
  naming no leader, or no connection) is skipped for the next address. A member whose answer
  does not come in time is no longer believed to lead and moves to the end of the order, so
  the next attempt (retry.py) starts elsewhere.
- One ``call`` is one logical attempt: it tries each address at most once plus the redirects,
  all within ``timeout_s``. Retrying with backoff is retry.py's job, not this module's.
- A write that may have reached a member (unknown outcome) is never re-sent here.
- Calls waiting on a member the cluster has replaced (a frozen or cut-off leader) are
  abandoned as soon as another member names a newer leader (leader_watch.py): the channel to
  it is closed, a write returns as an unknown outcome, a read as a redirect or a try
  elsewhere. Every channel sends keepalive pings, so a
  connection to a member that stopped answering breaks within about ``KEEPALIVE_TIME_MS`` +
  ``KEEPALIVE_TIMEOUT_MS`` even when nobody watches it (a pull to a frozen follower).
- ``address_map`` translates a member's address into the one to dial (for a client outside
  Docker reaching ``n1:7701`` through a published ``127.0.0.1:port``). Only the channel sees
  the translation: leader beliefs, redirects and errors keep the cluster's own addresses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from raftlog.client.bearer_token import BearerToken
from raftlog.client.errors import (
    DeadlineExceededError,
    NotLeaderError,
    RaftlogError,
    UnavailableError,
    UnknownOutcomeError,
    from_rpc_error,
)
from raftlog.client.leader_watch import LeaderReport, LeaderWatch, WatchSettings
from raftlog.client.tls import ClientTls
from raftlog.proto import client_pb2_grpc

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# The nodes allow a ping every 500 ms (node/server.py); a frozen member is noticed in ~2 s.
KEEPALIVE_TIME_MS = 1000
KEEPALIVE_TIMEOUT_MS = 1000
DEFAULT_MAX_REDIRECTS = 3
_STUB_CLASSES: dict[str, Any] = {
    "Producer": client_pb2_grpc.ProducerStub,
    "Consumer": client_pb2_grpc.ConsumerStub,
    "Admin": client_pb2_grpc.AdminStub,
    "AccessControl": client_pb2_grpc.AccessControlStub,
}


def parse_addresses(addresses: str | Sequence[str]) -> tuple[str, ...]:
    """Normalise ``"h:p,h:p"`` or a list of ``"host:port"`` into a tuple, without duplicates.
    Raises ValueError when none is given or one has no port."""
    items = addresses.split(",") if isinstance(addresses, str) else list(addresses)
    result: list[str] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"address {item!r} is not of the form host:port")
        if item not in result:
            result.append(item)
    if not result:
        raise ValueError("no server address given")
    return tuple(result)


class Connection:
    """Channels to a cluster's members (created lazily, one per address) and the current
    leader belief. Thread-safe: producers, consumers and admin calls may share one."""

    def __init__(
        self,
        addresses: str | Sequence[str],
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
        address_map: Mapping[str, str] | None = None,
        watch: WatchSettings | None = None,
        tls: ClientTls | None = None,
        token: str | None = None,
    ) -> None:
        self._address_map = dict(address_map or {})
        # Token authentication (client/bearer_token.py): None sends none.
        self._token = BearerToken(token) if token is not None else None
        # TLS (client/tls.py): None dials plain TCP.
        self._tls = tls
        self._credentials = tls.credentials() if tls is not None else None
        self._addresses: list[str] = list(parse_addresses(addresses))
        self._options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
            ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        self._max_redirects = max_redirects
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[tuple[str, str], Any] = {}
        self._leader: str | None = None
        self._leader_term = 0
        # Rotates the first address tried when no leader is known, to spread reads.
        self._next_index = 0
        self._closed = False
        self._watch = LeaderWatch(
            lambda address: self.stub("Admin", address),
            lambda: self.addresses,
            self._believed_term,
            self._replaced,
            watch,
        )

    @property
    def addresses(self) -> tuple[str, ...]:
        """Every address known: the configured ones, then any learnt from redirects."""
        with self._lock:
            return tuple(self._addresses)

    @property
    def leader_address(self) -> str | None:
        """The member believed to lead, or None when unknown."""
        with self._lock:
            return self._leader

    def note_leader(self, address: str | None, term: int = 0) -> None:
        """Record a leader belief (None forgets it). A known term lower than one already seen
        is ignored: that redirect is stale."""
        with self._lock:
            if address is None:
                self._leader = None
                return
            if term and term < self._leader_term:
                return
            self._leader_term = max(self._leader_term, term)
            self._leader = address
            if address not in self._addresses:
                self._addresses.append(address)

    def _demote(self, address: str) -> None:
        """Forget ``address`` as the leader and try it last from now on."""
        with self._lock:
            if self._leader == address:
                self._leader = None
            if address in self._addresses:
                self._addresses.remove(address)
                self._addresses.append(address)

    def _dial(self, address: str) -> grpc.Channel:
        if self._tls is None or self._credentials is None:
            channel = grpc.insecure_channel(address, options=self._options)
        else:
            options = [*self._options, *self._tls.channel_options()]
            channel = grpc.secure_channel(address, self._credentials, options=options)
        return channel if self._token is None else grpc.intercept_channel(channel, self._token)

    def stub(self, service: str, address: str) -> Any:
        """The generated stub of ``service`` ("Producer", "Consumer", "Admin") at ``address``."""
        with self._lock:
            if self._closed:
                raise RaftlogError("the connection is closed")
            key = (service, address)
            stub = self._stubs.get(key)
            if stub is None:
                channel = self._channels.get(address)
                if channel is None:
                    dial = self._address_map.get(address, address)
                    channel = self._dial(dial)
                    self._channels[address] = channel
                stub = _STUB_CLASSES[service](channel)
                self._stubs[key] = stub
            return stub

    def _order(self, leader_only: bool, address: str | None) -> list[str]:
        with self._lock:
            addresses = list(self._addresses)
            if address is not None and not leader_only:
                # A question for one member (its own status, its view of a topic): another
                # member's answer would be a wrong answer, not a fallback.
                return [address]
            if address is not None:
                first = address
            elif self._leader is not None:
                first = self._leader
            else:
                first = addresses[self._next_index % len(addresses)]
                if not leader_only:
                    self._next_index += 1
        return [first] + [a for a in addresses if a != first]

    def call(
        self,
        service: str,
        method: str,
        request: Any,
        *,
        timeout_s: float,
        leader_only: bool,
        write: bool,
        address: str | None = None,
    ) -> Any:
        """Send ``request`` to ``service.method`` and return the response.

        ``leader_only`` calls follow redirects, and ``address`` is the first member they try;
        other calls with ``address`` ask that member only (e.g. for its own status). Raises
        the RaftlogError of the last member tried: UnavailableError / NotLeaderError when no
        member could serve it, UnknownOutcomeError at once for a write whose answer was lost.
        """
        deadline = time.monotonic() + timeout_s
        pending = self._order(leader_only, address)
        tried: set[str] = set()
        redirects = 0
        last_error: RaftlogError | None = None
        # Bounded: each address once, plus at most max_redirects redirect targets.
        for _ in range(len(pending) + self._max_redirects + 1):
            if not pending:
                break
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                break
            target = pending.pop(0)
            tried.add(target)
            try:
                response = self._invoke(
                    service, method, request, target, remaining_s, leader_only, write
                )
            except RaftlogError as failed:
                error = failed
            else:
                if leader_only:
                    self.note_leader(target)
                return response
            last_error = error
            if isinstance(error, NotLeaderError) and error.leader_address:
                self.note_leader(error.leader_address, error.term)
                redirect = self.leader_address
                if redirect is not None and redirect != target and redirects < self._max_redirects:
                    redirects += 1
                    pending = [redirect] + [a for a in pending if a != redirect]
                    continue
                continue
            if isinstance(error, NotLeaderError | UnavailableError):
                if self.leader_address == target:
                    self.note_leader(None)
                continue
            if isinstance(error, UnknownOutcomeError | DeadlineExceededError):
                # A member that does not answer in time (frozen, cut off silently) must not
                # stay first: the next attempt starts elsewhere and finds the new leader.
                self._demote(target)
            raise error
        if last_error is None:
            raise UnavailableError(
                f"no member answered within {timeout_s:.1f} s "
                f"(tried {', '.join(sorted(tried)) or 'none'})"
            )
        raise last_error

    def _invoke(
        self,
        service: str,
        method: str,
        request: Any,
        target: str,
        timeout_s: float,
        leader_only: bool,
        write: bool,
    ) -> Any:
        """One blocking call to ``target``, watched by the leader watch (see the module rules);
        its failure as the RaftlogError the caller acts on."""
        stub = self.stub(service, target)
        call_id = self._watch.begin(target, leader_only=leader_only)
        try:
            response = getattr(stub, method)(request, timeout=timeout_s)
        except grpc.RpcError as rpc_error:
            report = self._watch.end(call_id)
            if report is None:
                raise from_rpc_error(rpc_error, write=write, address=target) from None
            raise _abandoned(target, report, write=write, leader_only=leader_only) from None
        except ValueError as closed:  # its channel was closed before the call started
            self._watch.end(call_id)
            raise UnavailableError(f"{target}: {closed}", address=target) from None
        self._watch.end(call_id)
        return response

    def _believed_term(self) -> int:
        with self._lock:
            return self._leader_term

    def _replaced(self, target: str, report: LeaderReport) -> None:
        """The leader watch heard of a newer leader than ``target``: believe it, and close the
        channel to ``target`` so every call waiting on it returns now (a new channel is made
        on the next call there)."""
        self.note_leader(report.leader_address, report.term)
        with self._lock:
            channel = self._channels.pop(target, None)
            for key in [k for k in self._stubs if k[1] == target]:
                del self._stubs[key]
        if channel is not None:
            channel.close()

    def close(self) -> None:
        """Close every channel. Calls after this raise RaftlogError."""
        self._watch.close()
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        for channel in channels:
            channel.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _abandoned(
    target: str, report: LeaderReport, *, write: bool, leader_only: bool
) -> RaftlogError:
    """What a call the leader watch gave up on raises: a write's outcome is unknown; a
    leader-only read follows the new leader; any other read tries elsewhere."""
    moved = f"{target} did not answer and {report.leader_address} leads now (term {report.term})"
    if write:
        return UnknownOutcomeError(f"{moved}; the write may or may not be stored", address=target)
    if leader_only:
        return NotLeaderError(
            moved, leader_address=report.leader_address, term=report.term, address=target
        )
    return UnavailableError(moved, address=target)
