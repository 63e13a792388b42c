"""ControllerState and choose_master: elections only from the in-sync set, stale epochs and
foreign in-sync changes refused, the first master the largest log, deterministic ties."""

from __future__ import annotations

from raftlog.controller.state import ControllerState, Group, choose_master

G = "broker-a"


def group_of(*members: str) -> ControllerState:
    state = ControllerState()
    for member in members:
        assert state.register(G, member, f"{member}:7701").applied
    return state


def test_elections_bump_the_epoch_and_refuse_stale_ones() -> None:
    state = group_of("b1", "b2", "b3")
    assert state.elect(G, "b1", 0).applied
    assert (state.group(G).master_id, state.group(G).epoch) == ("b1", 1)
    assert not state.elect(G, "b2", 0).applied  # a racing election on the old epoch
    assert state.group(G).in_sync == frozenset({"b1"})
    assert not state.elect(G, "b2", 1).applied  # b2 is not in sync
    assert state.alter_in_sync(G, "b1", 1, frozenset({"b1", "b2"})).applied
    assert state.elect(G, "b2", 1).applied
    assert (state.group(G).master_id, state.group(G).epoch) == ("b2", 2)
    assert not state.elect(G, "nobody", 2).applied


def test_only_the_current_master_changes_its_in_sync_set() -> None:
    state = group_of("b1", "b2")
    state.elect(G, "b1", 0)
    assert not state.alter_in_sync(G, "b2", 1, frozenset({"b2"})).applied
    assert not state.alter_in_sync(G, "b1", 0, frozenset({"b1"})).applied
    assert not state.alter_in_sync(G, "b1", 1, frozenset({"b2"})).applied
    assert not state.alter_in_sync(G, "b1", 1, frozenset({"b1", "ghost"})).applied
    assert state.renew(G, "b1").applied and not state.renew(G, "b2").applied


def test_choose_master() -> None:
    fresh = Group(G, members={"b1": "a", "b2": "b", "b3": "c"})
    assert choose_master(fresh, {"b1": 10, "b2": 30, "b3": 30}) == "b2"  # largest, then id
    assert choose_master(fresh, {}) is None
    running = Group(
        G, members=fresh.members, master_id="b1", epoch=3, in_sync=frozenset({"b1", "b3"})
    )
    assert choose_master(running, {"b2": 99, "b3": 5}) == "b3"  # b2 is not in sync
    assert choose_master(running, {"b2": 99}) is None  # never an unclean election
