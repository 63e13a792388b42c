"""The queue allocation strategies (client/allocation.py), as RocketMQ's
AllocateMessageQueueAveragelyTest and friends check theirs: known answers for small shapes,
and for many shapes that the members' answers cover every queue exactly once, whatever
order the lists come in."""

from __future__ import annotations

import itertools
import random

import pytest

from raftlog.client.allocation import (
    STRATEGIES,
    average,
    average_by_circle,
    consistent_hash,
    strategy,
)

TOPIC = "orders"


def members_of(count: int) -> list[str]:
    return [f"c{index}" for index in range(count)]


def allocations(name: str, member_count: int, queue_count: int) -> dict[str, list[int]]:
    members = members_of(member_count)
    queues = list(range(queue_count))
    return {m: STRATEGIES[name](TOPIC, m, members, queues) for m in members}


@pytest.mark.parametrize(
    ("member_count", "queue_count", "expected"),
    [
        (1, 4, [[0, 1, 2, 3]]),
        (2, 4, [[0, 1], [2, 3]]),
        (3, 8, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (4, 6, [[0, 1], [2, 3], [4], [5]]),
        (4, 2, [[0], [1], [], []]),
        (3, 0, [[], [], []]),
    ],
)
def test_average_gives_contiguous_blocks(
    member_count: int, queue_count: int, expected: list[list[int]]
) -> None:
    got = allocations("average", member_count, queue_count)
    assert [got[m] for m in members_of(member_count)] == expected


@pytest.mark.parametrize(
    ("member_count", "queue_count", "expected"),
    [
        (2, 4, [[0, 2], [1, 3]]),
        (3, 8, [[0, 3, 6], [1, 4, 7], [2, 5]]),
        (4, 2, [[0], [1], [], []]),
    ],
)
def test_average_by_circle_deals_the_queues_round(
    member_count: int, queue_count: int, expected: list[list[int]]
) -> None:
    got = allocations("average_by_circle", member_count, queue_count)
    assert [got[m] for m in members_of(member_count)] == expected


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@pytest.mark.parametrize(
    ("member_count", "queue_count"), list(itertools.product(range(1, 9), range(0, 20)))
)
def test_every_queue_has_exactly_one_owner(name: str, member_count: int, queue_count: int) -> None:
    got = allocations(name, member_count, queue_count)
    owned = sorted(q for queues in got.values() for q in queues)
    assert owned == list(range(queue_count))
    if name != "consistent_hash":  # the two averaging strategies also balance
        sizes = [len(queues) for queues in got.values()]
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_the_order_of_the_inputs_does_not_matter(name: str) -> None:
    members = members_of(5)
    queues = list(range(16))
    shuffled_members, shuffled_queues = members[:], queues + queues[:3]
    random.Random(7).shuffle(shuffled_members)
    random.Random(8).shuffle(shuffled_queues)
    for member in members:
        assert STRATEGIES[name](TOPIC, member, shuffled_members, shuffled_queues) == STRATEGIES[
            name
        ](TOPIC, member, members, queues)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_member_outside_the_group_gets_nothing(name: str) -> None:
    assert STRATEGIES[name](TOPIC, "stranger", members_of(3), list(range(8))) == []


def test_consistent_hash_moves_only_the_leaving_members_queues() -> None:
    before = allocations("consistent_hash", 5, 64)
    after = {m: consistent_hash(TOPIC, m, members_of(4), list(range(64))) for m in members_of(4)}
    for member in members_of(4):
        # Each remaining member keeps what it had and only gains c4's queues.
        assert set(before[member]) <= set(after[member])
        assert set(after[member]) - set(before[member]) <= set(before["c4"])
    # Averaging moves more when a member leaves: c1 had 13..25, now 16..31.
    assert average(TOPIC, "c1", members_of(5), range(64)) != average(
        TOPIC, "c1", members_of(4), range(64)
    )
    assert average_by_circle(TOPIC, "c0", members_of(4), range(8)) == [0, 4]


def test_strategy_by_name() -> None:
    assert strategy("average") is average
    with pytest.raises(ValueError, match="allocation 'random' is not one of average, "):
        strategy("random")
