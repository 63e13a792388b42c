"""The chaos timeline: its series from hand-made histories, its label layout, and a real PNG
from one."""

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
from raftlog.chaos.timeline import (
    FaultSpan,
    Label,
    label_width_pt,
    place_labels,
    stack_rows,
    timeline_of,
    write_png,
)

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
    # Whole seconds up to the last send (at 4.0 s): second 4 has no length, it is not drawn.
    assert timeline.acked_per_s == (2, 0, 1, 0)
    assert timeline.faults == (
        FaultSpan("kill", ("n1",), 1.0, 2.0, leader="n1"),
        FaultSpan("pause", ("n3",), 3.0, 4.0, leader="n2"),  # never ended: lasts to the end
    )
    assert [f.label for f in timeline.faults] == ["kill n1 (leader)", "pause n3"]
    assert timeline.leaders == ((0.0, "n1", 1), (1.5, "n2", 2))


def test_the_partial_last_second_and_the_quiet_end_are_not_an_outage() -> None:
    ops = [Op("observer", "ok", LEADER_OBSERVED, 0, LeaderValue("n1", 1))]
    ops += _send_ok(S // 2, "a") + _send_ok(S + S // 2, "b") + _send_ok(2 * S + S // 2, "c")
    ops.append(Op("observer", "ok", LEADER_OBSERVED, 5 * S, LeaderValue("n1", 1)))  # after
    timeline = timeline_of(ops)
    assert timeline.duration_s == 5.0
    assert timeline.acked_per_s == (1, 1)  # [2, 3) holds the last send only in part


def test_an_outage_at_the_end_still_shows() -> None:
    ops = _send_ok(S // 2, "a")
    ops.append(Op("p1", "invoke", SEND, 3 * S, SendValue("t", "b")))
    ops.append(Op("p1", "fail", SEND, 3 * S + S // 2, SendValue("t", "b")))
    assert timeline_of(ops).acked_per_s == (1, 0, 0)


def test_the_leader_a_fault_hit_is_the_claim_of_the_highest_term_so_far() -> None:
    ops = [
        Op("observer", "ok", LEADER_OBSERVED, 0, LeaderValue("n1", 1)),
        Op("observer", "ok", LEADER_OBSERVED, S, LeaderValue("n2", 2)),
        Op("observer", "ok", LEADER_OBSERVED, 2 * S, LeaderValue("n1", 1)),  # a stale claim
        Op("nemesis", "ok", FAULT_START, 3 * S, FaultValue("partition-one-way", ("n1", "n2"))),
    ]
    (fault,) = timeline_of(ops).faults
    assert fault.leader == "n2"
    assert fault.label == "partition-one-way n1,n2 (leader)"
    before_any = timeline_of([Op("nemesis", "ok", FAULT_START, 0, FaultValue("kill", ("n1",)))])
    assert before_any.faults[0].label == "kill n1"


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


def test_stacked_rows_never_overlap() -> None:
    assert stack_rows([(0, 5), (1, 3), (3, 6), (5, 8), (2, 4)]) == (0, 1, 1, 0, 2)
    assert stack_rows([]) == ()


def test_a_label_that_would_pass_the_end_ends_there() -> None:
    seconds_per_pt = 0.1
    labels = place_labels([(0.0, "kill n1"), (1.0, "pause n2"), (99.0, "kill n3")], 8, 0.1, 100)
    width_s = label_width_pt("kill n3", 8) * seconds_per_pt
    assert labels == [Label(0.0, "left", 0), Label(1.0, "left", 1), Label(100, "right", 0)]
    assert 100 - width_s < 99.0  # it would have passed the end


def test_the_width_estimate_covers_the_drawn_text() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(dpi=110)
    try:
        renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
        for text, font_pt, weight in [
            ("partition-leader-controller n2 (leader)", 8.0, "normal"),
            ("partition-one-way n2 (leader),n3", 8.0, "normal"),
            ("rolling-restart n1 (leader),n2,n3", 8.0, "normal"),
            ("n2 t19", 9.5, "bold"),
        ]:
            drawn = figure.text(0, 0, f" {text}", fontsize=font_pt, fontweight=weight)
            drawn_pt = drawn.get_window_extent(renderer).width * 72 / figure.dpi
            assert drawn_pt <= label_width_pt(text, font_pt), text
    finally:
        plt.close(figure)


def test_many_close_faults_make_a_taller_png(tmp_path: Path) -> None:
    few, many = tmp_path / "few.png", tmp_path / "many.png"
    write_png(timeline_of(_history()), few, "few")
    ops = _history()
    for i in range(8):  # eight faults within 2 s: their labels need more rows
        ops.append(Op("nemesis", "ok", FAULT_START, S + i * S // 4, FaultValue("pause", ("n2",))))
    write_png(timeline_of(ops), many, "many")
    assert _png_height_px(many) > _png_height_px(few)


def _png_height_px(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[20:24], "big")  # the IHDR chunk's height
