"""The Raft paper's Figure 8, played out on five nodes: an entry of an earlier term that a
leader finds on a majority is NOT committed by counting; with the planted bug it is, and a
later leader overwrites it - a committed entry lost."""

from __future__ import annotations

import pytest

from raftlog.raft.types import Message, MessageType, PlantedBug
from tests.unit.raft.cluster import Cluster, SafetyChecker

IDS = ("s1", "s2", "s3", "s4", "s5")


def play_figure_8(planted_bugs: frozenset[PlantedBug]) -> Cluster:
    cluster = Cluster(
        IDS, pre_vote=False, check_quorum=False, max_append_bytes=1, planted_bugs=planted_bugs
    )
    checker = SafetyChecker()

    def pump() -> None:
        cluster.pump(on_round=lambda: checker.check(cluster))

    def tick_and_pump(ticks: int) -> None:
        for _ in range(ticks):
            for node_id in IDS:
                cluster.tick(node_id)
            pump()

    def campaign_until_leader(node_id: str) -> None:
        for _ in range(3):  # the first try may only teach it the current term
            cluster.nodes[node_id].campaign()
            pump()
            if cluster.nodes[node_id].role.name == "LEADER":
                return
        raise AssertionError(f"{node_id} not elected")

    # (a) s1 leads term 1 and replicates entry 2 (X) to s2 only.
    campaign_until_leader("s1")
    cluster.partition(["s1", "s2"], ["s3", "s4", "s5"])
    cluster.nodes["s1"].propose(b"XX")  # too big to share an APPEND with the no-op
    pump()
    # (b) s1 crashes; s5 wins term 2 with s3 and s4 and appends its no-op at index 2, which
    # never leaves it.
    cluster.heal()
    cluster.restart("s1")
    cluster.partition(["s1"], ["s2"], ["s3", "s4", "s5"])
    cluster.filters.append(lambda m: not (m.source == "s5" and m.type == MessageType.APPEND))
    campaign_until_leader("s5")
    # (c) s5 crashes; s1 returns and wins term 3; it sends X to s3 and s4, but its own no-op
    # (index 3) is stored by nobody: the APPENDs carrying it are lost once the target holds
    # index 2 (before that, the target rejects them, which is how s1 finds where to resume).
    cluster.heal()
    cluster.restart("s5")
    cluster.partition(["s1", "s2", "s3", "s4"], ["s5"])

    def stores_noop(m: Message) -> bool:
        carries_index_3 = m.type == MessageType.APPEND and any(e.index == 3 for e in m.entries)
        return carries_index_3 and cluster.storages[m.target].last_index() >= 2

    cluster.filters.append(lambda m: not stores_noop(m))
    campaign_until_leader("s1")
    tick_and_pump(3)
    assert [cluster.storages[n].term(2) for n in IDS[:4]] == [1, 1, 1, 1]  # X on a majority
    if planted_bugs:
        assert cluster.data_applied("s1") == [b"XX"]  # committed by counting, in term 3
    # (d) s1 crashes; s5 (last term 2 beats X's term 1) wins with s2, s3, s4 and overwrites X.
    cluster.heal()
    cluster.restart("s1")
    cluster.partition(["s1"], ["s2", "s3", "s4", "s5"])
    campaign_until_leader("s5")
    tick_and_pump(3)
    return cluster


def test_figure_8_old_term_entry_is_not_committed_by_counting():
    cluster = play_figure_8(frozenset())
    assert cluster.data_applied("s1") == []  # X was on a majority, but never committed
    assert cluster.storages["s2"].term(2) == 2  # ...so overwriting it lost nothing


def test_figure_8_with_planted_bug_loses_a_committed_entry():
    with pytest.raises(AssertionError, match=r"s2|s3|s4|s5"):
        play_figure_8(frozenset({PlantedBug.COMMIT_PREVIOUS_TERM_BY_COUNTING}))
