"""The leader watch: notices, while calls wait on a member, that the cluster has elected
someone else, and has the connection give up on that member.

A frozen leader (SIGSTOP, a long pause, a hung disk, a half-open connection) keeps its TCP
connections open, so a call to it waits until its deadline, and keepalive notices only after
seconds; a killed leader's connection breaks at once. To make both cost the client about the
same short stall, every call registers while it waits (``begin`` / ``end``). A watcher thread
looks every ``probe_interval_s``: when a leader-only call to a member has waited more than
``suspect_after_s``, it asks the other members who leads (ClusterStatus, in parallel, each with
a short deadline). A member naming another leader, at a term higher than the one the client
believed in, makes the watch mark every call waiting on that member abandoned and tell the
connection (``on_replaced``), which closes its channel to the member: the blocked calls return
at once, a write as an unknown outcome (an idempotent producer's resend is deduplicated by the
server), a read as a redirect or a try elsewhere.

Calls are plain blocking gRPC calls: the watch costs a call two dictionary operations, not a
future (a gRPC future starts a channel thread per call when none is running: 0.15-0.35 ms).

Rules this module keeps:
- A slow leader is not a dead one: a report naming the call's own member, no leader, or a
  leader at a term not above the believed one keeps the calls waiting until their deadlines
  (a SYNC_MASTER waiting for its slaves answers within its flush timeout).
- Probes are shared: however many calls wait, the members are asked at most once per
  ``probe_interval_s``; every probe waits at most ``probe_timeout_s``; a member that does not
  answer is simply not counted.
- The watcher thread starts with the first call and ends with ``close``; every wait in it is
  bounded.
"""

from __future__ import annotations

import itertools
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


@dataclass(frozen=True, slots=True)
class _Waiting:
    target: str
    started_s: float
    leader_only: bool


class LeaderWatch:
    """Shared by one Connection's calls. ``admin_stub(address)`` gives the Admin stub of a
    member, ``addresses()`` every member known, ``believed_term()`` the highest term the
    client has seen a leader at; ``on_replaced(target, report)`` is called (from the watcher
    thread) once the calls waiting on ``target`` are marked abandoned."""

    def __init__(
        self,
        admin_stub: Callable[[str], Any],
        addresses: Callable[[], Sequence[str]],
        believed_term: Callable[[], int],
        on_replaced: Callable[[str, LeaderReport], None],
        settings: WatchSettings | None = None,
    ) -> None:
        self.settings = settings or WatchSettings()
        self._admin_stub = admin_stub
        self._addresses = addresses
        self._believed_term = believed_term
        self._on_replaced = on_replaced
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Waiting] = {}
        self._abandoned: dict[int, LeaderReport] = {}
        self._probed_at = float("-inf")
        self._reports: list[LeaderReport] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the calls' side -----------------------------------------------------------------

    def begin(self, target: str, *, leader_only: bool) -> int:
        """Register a call about to wait on ``target``; returns its id for ``end``."""
        call_id = next(self._ids)
        with self._lock:
            self._waiting[call_id] = _Waiting(target, time.monotonic(), leader_only)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="raftlog-leader-watch", daemon=True
                )
                self._thread.start()
        return call_id

    def end(self, call_id: int) -> LeaderReport | None:
        """Unregister a call; the report that made the watch abandon it, or None."""
        with self._lock:
            self._waiting.pop(call_id, None)
            return self._abandoned.pop(call_id, None)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.settings.probe_interval_s + 2 * self.settings.probe_timeout_s + 1)

    # -- the watcher ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self.settings.probe_interval_s):
            for target in self._suspects():
                report = self.newer_leader(target, self._believed_term())
                if report is not None:
                    self._abandon(target, report)

    def _suspects(self) -> set[str]:
        """Members a leader-only call has waited on for longer than ``suspect_after_s``."""
        oldest_s = time.monotonic() - self.settings.suspect_after_s
        with self._lock:
            return {
                w.target for w in self._waiting.values() if w.leader_only and w.started_s < oldest_s
            }

    def _abandon(self, target: str, report: LeaderReport) -> None:
        with self._lock:
            for call_id, waiting in self._waiting.items():
                if waiting.target == target:
                    self._abandoned[call_id] = report
        self._on_replaced(target, report)

    def newer_leader(self, target: str, believed_term: int) -> LeaderReport | None:
        """A report of a leader other than ``target`` at a term above ``believed_term``, from
        the latest probe round (made now if the last is older than the probe interval)."""
        newer = [
            r
            for r in self._recent_reports(target)
            if r.leader_address and r.leader_address != target and r.term > believed_term
        ]
        return max(newer, key=lambda r: r.term, default=None)

    def _recent_reports(self, target: str) -> list[LeaderReport]:
        with self._lock:
            if time.monotonic() - self._probed_at < self.settings.probe_interval_s:
                return list(self._reports)
            self._probed_at = time.monotonic()
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
