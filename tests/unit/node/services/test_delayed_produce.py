"""The producer service's delay fields: checked before anything is converted, and the batch
rewritten into the schedule topic on the leader's clock."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from raftlog.node.errors import InvalidRequestError
from raftlog.node.messaging.delay import TIMER_QUEUE_ID, DelaySettings, parse_delay_levels
from raftlog.node.services.delayed_produce import check_delay, delayed, wants_delay
from raftlog.proto import client_pb2
from raftlog.store.hashing import SCHEDULE_TOPIC
from raftlog.store.message import Message

SETTINGS = DelaySettings(parse_delay_levels("1s 2s"), timer_max_delay_ms=60_000)
BATCH = [Message("orders", 1, b"a"), Message("orders", 0, b"b")]


def write_path(replication: str = "raft") -> Any:
    return SimpleNamespace(cluster_view=lambda: SimpleNamespace(replication=replication))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def request(**fields: int) -> client_pb2.ProduceRequest:
    return client_pb2.ProduceRequest(topic="orders", **fields)


def test_no_delay_is_left_alone() -> None:
    assert not wants_delay(request())
    check_delay(request(), SETTINGS, write_path("master-slave"))
    assert delayed(BATCH, request(), SETTINGS) == BATCH


@pytest.mark.parametrize(
    ("fields", "replication", "error"),
    [
        ({"delay_level": 1, "deliver_at_ms": 5}, "raft", "at most one"),
        ({"delay_level": 3}, "raft", r"outside 1\.\.2"),
        ({"deliver_at_ms": -5}, "raft", "must be >= 0"),
        ({"deliver_at_ms": 2**62}, "raft", "timer_max_delay_ms = 60000"),
        ({"delay_level": 1}, "master-slave", "need replication = raft"),
    ],
)
def test_bad_delays_are_refused(fields: dict[str, int], replication: str, error: str) -> None:
    with pytest.raises(InvalidRequestError, match=error):
        check_delay(request(**fields), SETTINGS, write_path(replication))


def test_a_level_is_due_after_its_delay_on_the_servers_clock() -> None:
    before_ms = now_ms()
    scheduled = delayed(BATCH, request(delay_level=2), SETTINGS)
    assert [(m.topic, m.queue_id) for m in scheduled] == [(SCHEDULE_TOPIC, 1)] * 2
    due_ms = int(dict(scheduled[0].properties)["TIMER_DELIVER_MS"])
    assert before_ms + 2000 <= due_ms <= now_ms() + 2000
    assert dict(scheduled[1].properties)["REAL_QID"] == "0"


def test_a_delivery_time_goes_to_the_timer_queue_unless_it_passed() -> None:
    at_ms = now_ms() + 30_000
    scheduled = delayed(BATCH, request(deliver_at_ms=at_ms), SETTINGS)
    assert {m.queue_id for m in scheduled} == {TIMER_QUEUE_ID}
    assert dict(scheduled[0].properties)["TIMER_DELIVER_MS"] == str(at_ms)
    assert delayed(BATCH, request(deliver_at_ms=now_ms() - 1), SETTINGS) == BATCH
