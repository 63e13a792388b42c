"""The simulated network: ordering, faults and partitions behave as documented."""

from __future__ import annotations

import random

from raftlog.raft.types import Message, MessageType

from .network import Network, NetworkFaults


def message(source: str = "n1", target: str = "n2", term: int = 1) -> Message:
    return Message(type=MessageType.HEARTBEAT, source=source, target=target, term=term)


def drain(network: Network, now_tick: int) -> list[int]:
    delivered = []
    while (envelope := network.pop_due(now_tick)) is not None:
        delivered.append(envelope.message.term)
    return delivered


def test_messages_due_on_one_tick_arrive_in_send_order_one_tick_later() -> None:
    network = Network(random.Random(1), NetworkFaults())
    for term in (1, 2, 3):
        assert network.send(message(term=term), now_tick=0, source_incarnation=1) == 1
    assert drain(network, 0) == []
    assert drain(network, 1) == [1, 2, 3]


def test_drop_everything() -> None:
    network = Network(random.Random(1), NetworkFaults(drop_probability=1.0))
    assert network.send(message(), now_tick=0, source_incarnation=1) == 0
    assert network.in_flight_count() == 0


def test_duplicate_everything() -> None:
    network = Network(random.Random(1), NetworkFaults(duplicate_probability=1.0))
    assert network.send(message(), now_tick=0, source_incarnation=1) == 2
    assert drain(network, 1) == [1, 1]


def test_delays_reorder_but_stay_within_bounds() -> None:
    faults = NetworkFaults(delay_probability=1.0, delay_ticks_max=5)
    network = Network(random.Random(3), faults)
    for term in range(1, 41):
        network.send(message(term=term), now_tick=0, source_incarnation=1)
    ticks = [envelope.deliver_tick for envelope in network.pending()]
    assert all(2 <= tick <= 6 for tick in ticks)
    delivered = [term for tick in range(7) for term in drain(network, tick)]
    assert sorted(delivered) == list(range(1, 41))
    assert delivered != sorted(delivered), "random delays must reorder some messages"


def test_symmetric_partition_blocks_both_ways_and_heals() -> None:
    network = Network(random.Random(1), NetworkFaults())
    network.partition(["n1"], ["n2", "n3"])
    assert network.is_blocked("n1", "n2") and network.is_blocked("n2", "n1")
    assert not network.is_blocked("n2", "n3")
    assert network.send(message("n1", "n2"), now_tick=0, source_incarnation=1) == 0
    network.heal()
    assert network.blocked_links() == []


def test_one_way_partition_blocks_one_direction() -> None:
    network = Network(random.Random(1), NetworkFaults())
    network.partition(["n1"], ["n2"], one_way=True)
    assert network.is_blocked("n1", "n2")
    assert not network.is_blocked("n2", "n1")


def test_take_removes_the_chosen_envelope() -> None:
    network = Network(random.Random(1), NetworkFaults())
    for term in (1, 2, 3):
        network.send(message(term=term), now_tick=0, source_incarnation=1)
    middle = network.pending()[1]
    assert network.take(middle.sequence).message.term == 2
    assert [envelope.message.term for envelope in network.pending()] == [1, 3]


def test_same_seed_same_fault_decisions() -> None:
    faults = NetworkFaults(0.3, 0.3, 0.5, 4)
    runs = []
    for _ in range(2):
        network = Network(random.Random(9), faults)
        for term in range(30):
            network.send(message(term=term), now_tick=0, source_incarnation=1)
        runs.append([(e.deliver_tick, e.message.term) for e in network.pending()])
    assert runs[0] == runs[1]
