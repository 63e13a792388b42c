"""What a message sent back becomes: retry at level 3 + retries, then the dead-letter topic."""

from __future__ import annotations

import pytest

from raftlog.node.messaging.retry import (
    SendBackPlan,
    dlq_topic,
    is_node_written_topic,
    plan_send_back,
    retry_topic,
)


@pytest.mark.parametrize(
    ("reconsume_times", "expected"),
    [
        (0, SendBackPlan("%RETRY%g", False, 3, 1)),
        (1, SendBackPlan("%RETRY%g", False, 4, 2)),
        (15, SendBackPlan("%RETRY%g", False, 18, 16)),
        (16, SendBackPlan("%DLQ%g", True, None, 17)),
        (40, SendBackPlan("%DLQ%g", True, None, 41)),
    ],
)
def test_rocketmqs_ladder(reconsume_times: int, expected: SendBackPlan) -> None:
    assert plan_send_back("g", reconsume_times, 16, level_count=18) == expected


def test_levels_stop_at_the_last_and_an_asked_level_wins() -> None:
    assert plan_send_back("g", 5, 16, level_count=4).delay_level == 4
    assert plan_send_back("g", 5, 16, level_count=18, delay_level=1).delay_level == 1
    assert plan_send_back("g", 2, 2, level_count=18, delay_level=1).dead_letter


def test_node_written_topics() -> None:
    assert retry_topic("g") == "%RETRY%g" and dlq_topic("g") == "%DLQ%g"
    for topic in ("SCHEDULE_TOPIC_XXXX", "%RETRY%g", "%DLQ%g"):
        assert is_node_written_topic(topic)
    assert not is_node_written_topic("orders%RETRY%")
