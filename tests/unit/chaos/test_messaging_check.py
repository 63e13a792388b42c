"""The messaging checker on hand-made histories: for each rule (delay due time and lateness,
transactional at-most/exactly-once, order per sharding key, reconsume-later seen again) a
history that keeps it (valid) and histories that break it (the anomaly is reported), plus the
JSON lines round trip and the recording rules."""

from __future__ import annotations

from typing import Any

import pytest

from raftlog.chaos.messaging_check import (
    DELAYED_SEND,
    DLQ,
    EARLY_DELIVERY,
    HEALED,
    LATE_DELIVERY,
    ORDER_VIOLATION,
    ORDERED_SEND,
    RECEIVE,
    RECONSUME_LATER,
    RETRY_LOST,
    TXN_CHECK,
    TXN_DUPLICATE,
    TXN_LOST,
    TXN_ROLLED_BACK_DELIVERED,
    TXN_SEND,
    MalformedMessagingHistoryError,
    MsgOp,
    check_messaging,
    dumps_messaging,
    loads_messaging,
)


class _History:
    """Builds a history with a ticking clock."""

    def __init__(self) -> None:
        self.ops: list[MsgOp] = []

    def add(self, process: str, op_type: str, f: str, **value: Any) -> _History:
        self.ops.append(MsgOp(process, op_type, f, len(self.ops), value))  # type: ignore[arg-type]
        return self

    def call(self, process: str, f: str, outcome: str, done: dict[str, Any], **value: Any):
        self.add(process, "invoke", f, **value)
        if outcome != "open":
            self.add(process, outcome, f, **{**value, **done})
        return self

    def receive(self, group: str, *messages: dict[str, Any], orderly: bool = False) -> _History:
        return self.add(
            "consumer", "ok", RECEIVE, group=group, orderly=orderly, messages=list(messages)
        )


def _msg(value: str, offset: int, stored_ms: int = 0, topic: str = "t", queue_id: int = 0):
    return {
        "value": value,
        "topic": topic,
        "queue_id": queue_id,
        "queue_offset": offset,
        "store_timestamp_ms": stored_ms,
        "received_wall_ms": stored_ms + 1,
    }


def _delayed(h: _History, value: str, outcome: str = "ok", due_ms: int = 10_000) -> _History:
    return h.call(
        "delayer",
        DELAYED_SEND,
        outcome,
        {"store_timestamp_ms": due_ms - 5_000, "due_ms": due_ms} if outcome == "ok" else {},
        value=value,
        topic="t",
        delay_level=2,
        level_delay_ms=5_000,
        deliver_at_ms=0,
        invoke_wall_ms=due_ms - 5_010,
    )


# Rule 1: delayed messages.


def test_delayed_on_time_is_valid_and_reports_lateness() -> None:
    h = _delayed(_History(), "d1").receive("g", _msg("d1", 0, stored_ms=10_030))
    report = check_messaging(h.ops)
    assert report.valid, report.render()
    assert report.max_lateness_ms == 30
    assert report.counts["delayed-delivered"] == 1


def test_delayed_read_before_due_is_early() -> None:
    h = _delayed(_History(), "d1").receive("g", _msg("d1", 0, stored_ms=9_000))
    assert check_messaging(h.ops).kinds() == [EARLY_DELIVERY]


def test_unknown_delayed_read_before_its_lower_bound_is_early() -> None:
    # No acknowledgement: the invoke's wall time + the level's delay still bounds the due time.
    h = _delayed(_History(), "d1", outcome="info").receive("g", _msg("d1", 0, stored_ms=4_000))
    assert check_messaging(h.ops).kinds() == [EARLY_DELIVERY]


def test_deliver_at_within_the_granularity_tolerance_is_valid() -> None:
    h = _History().call(
        "delayer", DELAYED_SEND, "ok", {"store_timestamp_ms": 1_000},
        value="a", topic="t", deliver_at_ms=2_000, invoke_wall_ms=990,
    )  # fmt: skip
    h.receive("g", {**_msg("a", 0, stored_ms=1_998), "received_wall_ms": 2_001})
    assert check_messaging(h.ops).valid


def test_acknowledged_delayed_never_delivered_is_late() -> None:
    assert check_messaging(_delayed(_History(), "d1").ops).kinds() == [LATE_DELIVERY]


def test_unknown_delayed_never_delivered_is_allowed() -> None:
    assert check_messaging(_delayed(_History(), "d1", outcome="info").ops).valid


def test_lateness_is_measured_from_the_heal() -> None:
    h = _delayed(_History(), "d1").add("nemesis", "ok", HEALED, wall_ms=30_000)
    h.receive("g", _msg("d1", 0, stored_ms=31_000))
    report = check_messaging(h.ops, late_bound_ms=2_000)
    assert report.valid, report.render()
    assert report.max_lateness_ms == 21_000
    assert report.max_lateness_after_heal_ms == 1_000
    assert check_messaging(h.ops, late_bound_ms=500).kinds() == [LATE_DELIVERY]


def test_delivered_before_the_heal_is_not_late_after_it() -> None:
    h = _delayed(_History(), "d1").receive("g", _msg("d1", 0, stored_ms=10_050))
    h.add("nemesis", "ok", HEALED, wall_ms=30_000)
    report = check_messaging(h.ops)
    assert report.valid, report.render()
    assert (report.max_lateness_ms, report.max_lateness_after_heal_ms) == (50, 0)


# Rule 2: transactional messages.


def _txn(h: _History, value: str, decision: str, outcome: str = "ok") -> _History:
    return h.call(
        "txn", TXN_SEND, outcome, {"state": decision}, value=value, topic="t", decision=decision
    )


def test_transactions_kept_are_valid() -> None:
    h = _txn(_History(), "c", "commit")
    _txn(h, "r", "rollback")
    _txn(h, "u", "unknown-then-commit").add("txn", "ok", TXN_CHECK, value="u", state="commit")
    _txn(h, "i", "commit", outcome="info")
    h.receive("g", _msg("c", 0), _msg("u", 1))
    h.receive("g", _msg("c", 0))  # re-delivery of one position is not a duplicate
    report = check_messaging(h.ops)
    assert report.valid, report.render()
    assert report.counts["txn-committed"] == 2
    assert report.counts["txn-rolled-back"] == 1
    assert report.counts["txn-unknown"] == 1
    assert report.counts["txn-checks"] == 1


def test_committed_stored_twice_is_a_duplicate() -> None:
    h = _txn(_History(), "c", "commit").receive("g", _msg("c", 0), _msg("c", 1))
    assert check_messaging(h.ops).kinds() == [TXN_DUPLICATE]


def test_unknown_outcome_stored_twice_is_a_duplicate() -> None:
    h = _txn(_History(), "c", "commit", outcome="info").receive("g", _msg("c", 0), _msg("c", 1))
    assert check_messaging(h.ops).kinds() == [TXN_DUPLICATE]


def test_committed_never_delivered_is_lost() -> None:
    assert check_messaging(_txn(_History(), "c", "unknown-then-commit").ops).kinds() == [TXN_LOST]


@pytest.mark.parametrize(
    ("decision", "outcome"), [("rollback", "ok"), ("rollback", "info"), ("commit", "fail")]
)
def test_rolled_back_delivered_is_reported(decision: str, outcome: str) -> None:
    h = _txn(_History(), "r", decision, outcome=outcome).receive("g", _msg("r", 0))
    assert check_messaging(h.ops).kinds() == [TXN_ROLLED_BACK_DELIVERED]


# Rule 3: order per sharding key.


def _ordered(
    h: _History, value: str, seq: int, outcome: str = "ok", process: str = "p1"
) -> _History:
    return h.call(
        process,
        ORDERED_SEND,
        outcome,
        {"queue_id": 0},
        value=value,
        topic="t",
        sharding_key="k",
        seq=seq,
    )


def test_in_order_with_redelivery_is_valid() -> None:
    h = _ordered(_ordered(_ordered(_History(), "a", 0), "b", 1), "c", 2)
    h.receive("o", _msg("a", 0), _msg("b", 1), orderly=True)
    h.receive("o", _msg("b", 1), _msg("c", 2), orderly=True)  # after a failover: b again
    report = check_messaging(h.ops)
    assert report.valid, report.render()
    assert report.counts["ordered-received"] == 3
    assert report.counts["sharding-keys"] == 1


def test_a_key_seen_out_of_order_is_reported() -> None:
    h = _ordered(_ordered(_History(), "a", 0), "b", 1)
    h.receive("o", _msg("b", 1), orderly=True).receive("o", _msg("a", 0), orderly=True)
    assert check_messaging(h.ops).kinds() == [ORDER_VIOLATION]


def test_an_unknown_earlier_send_may_be_missing() -> None:
    h = _ordered(_ordered(_History(), "a", 0, outcome="info"), "b", 1)
    h.receive("o", _msg("b", 0), orderly=True)
    assert check_messaging(h.ops).valid


def test_other_producers_and_non_orderly_groups_impose_no_order() -> None:
    h = _ordered(_ordered(_History(), "a", 0, process="p1"), "x", 0, process="p2")
    h.receive("o", _msg("x", 0), _msg("a", 1), orderly=True)
    h.receive("plain", _msg("b", 5))
    assert check_messaging(_ordered(h, "b", 1).ops).valid


# Rule 4: reconsume later.


def _sent_back(h: _History, value: str, outcome: str = "ok") -> _History:
    return h.call(
        "retrier", RECONSUME_LATER, outcome, {}, value=value, group="g", reconsume_times=0
    )


def test_sent_back_and_seen_again_or_dead_is_valid() -> None:
    h = _History().receive("g", _msg("a", 0), _msg("b", 1))
    _sent_back(_sent_back(h, "a"), "b")
    h.receive("g", {**_msg("a", 0, topic="%RETRY%g"), "reconsume_times": 1})
    h.add("retrier", "ok", DLQ, group="g", values=["b"])
    report = check_messaging(h.ops)
    assert report.valid, report.render()
    assert report.counts["reconsumed"] == 1
    assert report.counts["dead-letters"] == 1


def test_sent_back_never_seen_again_is_lost() -> None:
    h = _sent_back(_History().receive("g", _msg("a", 0)), "a")
    h.receive("other-group", _msg("a", 0))
    assert check_messaging(h.ops).kinds() == [RETRY_LOST]


def test_a_failed_send_back_needs_nothing() -> None:
    assert check_messaging(_sent_back(_History(), "a", outcome="fail").ops).valid


# Recording rules and the round trip.


def test_round_trip_and_malformed_histories() -> None:
    h = _txn(_delayed(_History(), "d1"), "c", "commit").receive(
        "g", _msg("d1", 0, 10_000), _msg("c", 1)
    )
    assert loads_messaging(dumps_messaging(h.ops)) == h.ops
    with pytest.raises(MalformedMessagingHistoryError):
        check_messaging([MsgOp("p", "ok", TXN_SEND, 0, {"value": "c", "decision": "commit"})])
    with pytest.raises(ValueError):
        MsgOp("p", "ok", "nonsense", 0, {})


def test_chaos_check_checks_a_messaging_history_too(tmp_path, capsys) -> None:
    from raftlog.cli import main

    (tmp_path / "history.jsonl").write_text("")
    (tmp_path / "replicas.jsonl").write_text("")
    messaging = tmp_path / "messaging-history.jsonl"
    messaging.write_text(dumps_messaging(_txn(_History(), "c", "commit").ops))
    args = ["chaos", "check", str(tmp_path / "history.jsonl"), str(tmp_path / "replicas.jsonl")]
    assert main([*args, "--messaging-history", str(messaging)]) == 1
    assert "txn-lost: c (commit) never delivered" in capsys.readouterr().out
    messaging.write_text(dumps_messaging(_txn(_History(), "r", "rollback").ops))
    assert main([*args, "--messaging-history", str(messaging)]) == 0
