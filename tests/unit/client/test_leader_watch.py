"""The leader watch's rules without servers: which reports end a wait (another leader at a
newer term only), that probes are shared between waiting calls, and that a call that answers
is never abandoned. tests/integration/test_frozen_leader.py drives it against a real frozen
leader."""

from __future__ import annotations

import threading
from typing import Any

import grpc

from raftlog.client.leader_watch import LeaderWatch, WatchSettings
from raftlog.proto import client_pb2

FAST = WatchSettings(suspect_after_s=0.01, probe_interval_s=0.05, probe_timeout_s=0.05)


class _Answer:
    def __init__(self, leader_address: str, term: int) -> None:
        self._status = client_pb2.ClusterStatusResponse(leader_address=leader_address, term=term)

    def result(self) -> Any:
        return self._status


class _Stub:
    def __init__(self, members: dict[str, tuple[str, int]], probes: list[str], address: str):
        self.ClusterStatus = self
        self._answer = members[address]
        self._probes = probes
        self._address = address

    def future(self, request: Any, timeout: float) -> _Answer:
        self._probes.append(self._address)
        return _Answer(*self._answer)


class _Pending(grpc.Future):
    """A call that answers when ``done`` is set."""

    def __init__(self) -> None:
        self.done_event = threading.Event()

    def exception(self, timeout: float | None = None) -> Any:
        if not self.done_event.wait(timeout):
            raise grpc.FutureTimeoutError()
        return None

    def cancel(self) -> bool:
        return True

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self.done_event.is_set()

    def done(self) -> bool:
        return self.done_event.is_set()

    def result(self, timeout: float | None = None) -> Any:
        return None

    def traceback(self, timeout: float | None = None) -> Any:
        return None

    def add_done_callback(self, fn: Any) -> None:
        raise NotImplementedError


def _watch(members: dict[str, tuple[str, int]], probes: list[str]) -> LeaderWatch:
    return LeaderWatch(lambda a: _Stub(members, probes, a), lambda: list(members), FAST)


def test_a_newer_leader_elsewhere_ends_the_wait() -> None:
    members = {"a:1": ("a:1", 3), "b:1": ("c:1", 4), "c:1": ("c:1", 4)}
    report = _watch(members, []).wait(_Pending(), "a:1", believed_term=3)
    assert report is not None and (report.leader_address, report.term) == ("c:1", 4)


def test_reports_of_the_target_no_leader_or_an_old_term_keep_waiting() -> None:
    members = {"a:1": ("a:1", 3), "b:1": ("a:1", 3), "c:1": ("", 3), "d:1": ("d:1", 2)}
    watch = _watch(members, [])
    assert watch.newer_leader("a:1", believed_term=3) is None
    call = _Pending()
    threading.Timer(0.2, call.done_event.set).start()
    assert watch.wait(call, "a:1", believed_term=3) is None  # the answer came: not abandoned


def test_probes_are_shared_and_never_ask_the_target() -> None:
    probes: list[str] = []
    watch = _watch({"a:1": ("a:1", 1), "b:1": ("a:1", 1), "c:1": ("a:1", 1)}, probes)
    for _ in range(20):
        watch.newer_leader("a:1", believed_term=1)
    assert sorted(probes) == ["b:1", "c:1"]  # one round: within one probe interval


def test_an_answered_call_is_not_probed_for() -> None:
    probes: list[str] = []
    call = _Pending()
    call.done_event.set()
    assert _watch({"a:1": ("b:1", 9), "b:1": ("b:1", 9)}, probes).wait(call, "a:1", 1) is None
    assert probes == []
