"""The leader watch: notices, while a leader-only call waits on its member, that the cluster
has elected someone else.

A frozen leader (SIGSTOP, a long pause, a hung disk, a half-open connection) keeps its TCP
connections open, so a call to it waits until its deadline, and keepalive notices only after
seconds; a killed leader's connection breaks at once. To make both cost the client about the
same short stall, a call to the believed leader that has not answered within
``suspect_after_s`` makes the watch ask the other members who leads (ClusterStatus, in
parallel, each with a short deadline). A member that names another leader, at a term higher
than the one the client believed in, ends the wait: the connection abandons the call, a
write as an unknown outcome (an idempotent producer's resend is deduplicated by the server),
a read as a redirect to the new leader.

Rules this module keeps:
- A slow leader is not a dead one: a report naming the call's own member, no leader, or a
  leader at a term not above the believed one keeps the call waiting until its own deadline
  (a SYNC_MASTER waiting for its slaves answers within its flush timeout).
- Probes are shared: however many calls wait, the members are asked at most once per
  ``probe_interval_s``; every probe waits at most ``probe_timeout_s``; a member that does not
  answer is simply not counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from raftlog.proto import client_pb2

# A leader answers a write in milliseconds; half a second without an answer is worth a look.
DEFAULT_SUSPECT_AFTER_S = 0.5
DEFAULT_PROBE_INTERVAL_S = 0.25
DEFAULT_PROBE_TIMEOUT_S = 0.3


@dataclass(frozen=True, slots=True)
class LeaderReport:
    """A member's answer: who leads, at which term."""

    leader_address: str
    term: int


@dataclass(frozen=True, slots=True)
class WatchSettings:
    suspect_after_s: float = DEFAULT_SUSPECT_AFTER_S
    probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S

    def __post_init__(self) -> None:
        for name in ("suspect_after_s", "probe_interval_s", "probe_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} is {getattr(self, name)}; it must be positive")


class LeaderWatch:
    """Shared by one Connection's calls. ``admin_stub(address)`` gives the Admin stub of a
    member; ``addresses()`` every member known."""

    def __init__(
        self,
        admin_stub: Callable[[str], Any],
        addresses: Callable[[], Sequence[str]],
        settings: WatchSettings | None = None,
    ) -> None:
        self.settings = settings or WatchSettings()
        self._admin_stub = admin_stub
        self._addresses = addresses
        self._lock = threading.Lock()
        self._probed_at = float("-inf")
        self._reports: list[LeaderReport] = []

    def wait(self, future: grpc.Future, target: str, believed_term: int) -> LeaderReport | None:
        """Wait for ``future`` (a call to ``target``) until it is done, or until another
        member names a newer leader: then that report (the caller abandons the call). Returns
        None once the call is done (its result or error is the future's)."""
        wait_s = self.settings.suspect_after_s
        # Bounded: the future ends by its own deadline, at which point done() is True.
        while not _done_within(future, wait_s):
            report = self.newer_leader(target, believed_term)
            if report is not None:
                return report
            wait_s = self.settings.probe_interval_s
        return None

    def newer_leader(self, target: str, believed_term: int) -> LeaderReport | None:
        """A report of a leader other than ``target`` at a term above ``believed_term``, from
        the latest probe round (made now if the last is older than the probe interval)."""
        reports = self._recent_reports(target)
        newer = [
            r
            for r in reports
            if r.leader_address and r.leader_address != target and r.term > believed_term
        ]
        return max(newer, key=lambda r: r.term, default=None)

    def _recent_reports(self, target: str) -> list[LeaderReport]:
        with self._lock:
            if time.monotonic() - self._probed_at < self.settings.probe_interval_s:
                return list(self._reports)
            self._probed_at = time.monotonic()  # claimed: concurrent waiters reuse this round
        reports = self._probe([a for a in self._addresses() if a != target])
        with self._lock:
            self._reports = reports
        return reports

    def _probe(self, addresses: Sequence[str]) -> list[LeaderReport]:
        request = client_pb2.ClusterStatusRequest()
        timeout_s = self.settings.probe_timeout_s
        pending = []
        for address in addresses:
            try:
                stub = self._admin_stub(address)
                pending.append(stub.ClusterStatus.future(request, timeout=timeout_s))
            except Exception:  # a closed connection or a bad address: no report from it
                continue
        reports: list[LeaderReport] = []
        for call in pending:
            try:
                status = call.result()
            except grpc.RpcError:
                continue  # down, frozen, or cut off: not counted
            reports.append(LeaderReport(status.leader_address, int(status.term)))
        return reports


def _done_within(future: grpc.Future, timeout_s: float) -> bool:
    try:
        future.exception(timeout=timeout_s)
    except grpc.FutureTimeoutError:
        return False
    except grpc.FutureCancelledError:
        return True
    return True
