"""The leader watch's rules without servers: which reports abandon the calls waiting on a
member (another leader at a newer term only), that probes are shared, that only a leader-only
call that has waited long enough is a reason to probe, and that every call on the replaced
member is abandoned. tests/integration/test_frozen_leader.py drives it against a real frozen
leader."""

from __future__ import annotations

import threading
import time
from typing import Any

from raftlog.client.leader_watch import LeaderReport, LeaderWatch, WatchSettings
from raftlog.proto import client_pb2

FAST = WatchSettings(suspect_after_s=0.05, probe_interval_s=0.02, probe_timeout_s=0.05)


class _Answer:
    def __init__(self, leader_address: str, term: int) -> None:
        self._status = client_pb2.ClusterStatusResponse(leader_address=leader_address, term=term)

    def result(self) -> Any:
        return self._status


class _Stub:
    """A member's Admin stub answering ClusterStatus with (leader address, term)."""

    def __init__(self, answer: tuple[str, int], probes: list[str], address: str) -> None:
        self.ClusterStatus = self
        self._answer = answer
        self._probes = probes
        self._address = address

    def future(self, request: Any, timeout: float) -> _Answer:
        self._probes.append(self._address)
        return _Answer(*self._answer)


class _Replaced:
    def __init__(self) -> None:
        self.calls: list[tuple[str, LeaderReport]] = []
        self.event = threading.Event()

    def __call__(self, target: str, report: LeaderReport) -> None:
        self.calls.append((target, report))
        self.event.set()


def _watch(
    members: dict[str, tuple[str, int]], probes: list[str], replaced: _Replaced, term: int = 3
) -> LeaderWatch:
    return LeaderWatch(
        lambda a: _Stub(members[a], probes, a), lambda: list(members), lambda: term, replaced, FAST
    )


def test_a_newer_leader_elsewhere_abandons_every_call_on_the_old_one() -> None:
    replaced = _Replaced()
    watch = _watch({"a:1": ("a:1", 3), "b:1": ("c:1", 4), "c:1": ("c:1", 4)}, [], replaced)
    try:
        write = watch.begin("a:1", leader_only=True)
        pull = watch.begin("a:1", leader_only=False)
        elsewhere = watch.begin("b:1", leader_only=False)
        assert replaced.event.wait(2.0), "the watch never gave up on the frozen leader"
        assert replaced.calls[0] == ("a:1", LeaderReport("c:1", 4))
        assert watch.end(write) == LeaderReport("c:1", 4)
        assert watch.end(pull) == LeaderReport("c:1", 4)  # its channel closes too
        assert watch.end(elsewhere) is None
    finally:
        watch.close()


def test_reports_of_the_target_no_leader_or_an_old_term_keep_calls_waiting() -> None:
    replaced = _Replaced()
    members = {"a:1": ("a:1", 3), "b:1": ("a:1", 3), "c:1": ("", 3), "d:1": ("d:1", 2)}
    watch = _watch(members, [], replaced)
    try:
        assert watch.newer_leader("a:1", believed_term=3) is None
        call = watch.begin("a:1", leader_only=True)
        assert not replaced.event.wait(0.3)
        assert watch.end(call) is None
    finally:
        watch.close()


def test_probes_are_shared_and_never_ask_the_target() -> None:
    probes: list[str] = []
    watch = _watch({"a:1": ("a:1", 1), "b:1": ("a:1", 1), "c:1": ("a:1", 1)}, probes, _Replaced())
    for _ in range(20):
        watch.newer_leader("a:1", believed_term=1)
    assert sorted(probes) == ["b:1", "c:1"]  # one round: within one probe interval


def test_only_a_leader_only_call_that_waited_long_enough_is_probed_for() -> None:
    probes: list[str] = []
    replaced = _Replaced()
    watch = _watch({"a:1": ("b:1", 9), "b:1": ("b:1", 9)}, probes, replaced)
    try:
        pull = watch.begin("a:1", leader_only=False)  # a long poll may wait: not a suspect
        time.sleep(0.3)
        assert probes == [] and not replaced.calls
        assert watch.end(pull) is None
        quick = watch.begin("a:1", leader_only=True)
        assert watch.end(quick) is None  # answered before suspect_after_s
        time.sleep(0.2)
        assert probes == []
    finally:
        watch.close()
