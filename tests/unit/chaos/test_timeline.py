"""The chaos timeline: its series from hand-made histories, and a real PNG from one."""

from __future__ import annotations

from pathlib import Path

from raftlog.chaos.history import (
    FAULT_END,
    FAULT_START,
    LEADER_OBSERVED,
    SEND,
    FaultValue,
    LeaderValue,
    Op,
    SendValue,
)
from raftlog.chaos.timeline import FaultSpan, timeline_of, write_png

S = 1_000_000_000


def _send_ok(time_ns: int, value: str) -> list[Op]:
    return [
        Op("p1", "invoke", SEND, time_ns - 1000, SendValue("t", value)),
        Op("p1", "ok", SEND, time_ns, SendValue("t", value, 0, 0, 0)),
    ]


def _history() -> list[Op]:
    ops = [Op("observer", "ok", LEADER_OBSERVED, 0, LeaderValue("n1", 1))]
    ops += _send_ok(S // 2, "a") + _send_ok(S // 2 + 10, "b") + _send_ok(2 * S + 5, "c")
    ops.append(Op("nemesis", "ok", FAULT_START, S, FaultValue("kill", ("n1",))))
    ops.append(Op("observer", "ok", LEADER_OBSERVED, S + 7, LeaderValue("n1", 1)))  # no change
    ops.append(Op("observer", "ok", LEADER_OBSERVED, 3 * S // 2, LeaderValue("n2", 2)))
    ops.append(Op("nemesis", "ok", FAULT_END, 2 * S, FaultValue("kill", ("n1",))))
    ops.append(Op("nemesis", "ok", FAULT_START, 3 * S, FaultValue("pause", ("n3",))))
    ops += _send_ok(4 * S, "d")
    return ops


def test_sends_per_second_faults_and_leader_changes() -> None:
    timeline = timeline_of(_history())
    assert timeline.duration_s == 4.0
    assert timeline.acked_per_s == (2, 0, 1, 0, 1)
    assert timeline.faults == (
        FaultSpan("kill", ("n1",), 1.0, 2.0),
        FaultSpan("pause", ("n3",), 3.0, 4.0),  # never ended: lasts to the end
    )
    assert timeline.leaders == ((0.0, "n1", 1), (1.5, "n2", 2))


def test_an_end_closes_the_oldest_open_fault_of_its_name() -> None:
    ops = [
        Op("nemesis", "ok", FAULT_START, 0, FaultValue("pause", ("n1",))),
        Op("nemesis", "ok", FAULT_START, S, FaultValue("pause", ("n2",))),
        Op("nemesis", "ok", FAULT_END, 2 * S, FaultValue("pause", ("n1",))),
        Op("nemesis", "ok", FAULT_END, 3 * S, FaultValue("pause", ("n2",))),
    ]
    spans = timeline_of(ops).faults
    assert [(f.targets, f.start_s, f.end_s) for f in spans] == [
        (("n1",), 0.0, 2.0),
        (("n2",), 1.0, 3.0),
    ]


def test_an_empty_history_has_an_empty_timeline() -> None:
    timeline = timeline_of([])
    assert (timeline.acked_per_s, timeline.faults, timeline.leaders) == ((), (), ())


def test_write_png_draws_a_png(tmp_path: Path) -> None:
    path = tmp_path / "timeline.png"
    write_png(timeline_of(_history()), path, "seed 1")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5_000
