"""ReplicationCollector: the node's replication state, read from its write path's
``ClusterView`` each time Prometheus scrapes.

Raft mode: term, commit/applied/last index, role, whether a leader is known, and on the leader
each follower's lag in entries. Master-slave mode: role (master or slave), epoch, and on the
master each slave's lag in bytes and seconds and whether it is in the in-sync set.

Rules this module keeps: a pure function of one ClusterView per scrape (``cluster_view`` never
blocks on the network); a node exports the families of its own mode only, and ``describe``
names both modes' families (docs and dashboard checks read it); a role gauge has one sample
per possible role, 1 for the current one, so a query never sees a role series vanish.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raftlog.node.write_path import ClusterView, MemberView

RAFT_ROLES = ("leader", "follower", "pre-candidate", "candidate", "learner")
MASTER_SLAVE_ROLES = ("master", "slave")


def _gauge(name: str, documentation: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def _followers(view: ClusterView) -> list[MemberView]:
    """The other members the answering node has progress for (it leads, or is the master)."""
    return [m for m in view.members if m.has_progress and m.node_id != view.node_id]


def _info(view: ClusterView | None) -> list[Metric]:
    info = _gauge(
        "raftlog_node_info",
        "Always 1; labels name the node, its cluster and its replication mode",
        ("node_id", "cluster_id", "replication"),
    )
    if view is not None:
        info.add_metric([view.node_id, view.cluster_id, view.replication], 1)
    return [info]


def _raft(view: ClusterView | None) -> list[Metric]:
    term = _gauge("raftlog_raft_term", "The node's current Raft term")
    commit = _gauge("raftlog_raft_commit_index", "Highest log index known committed")
    applied = _gauge("raftlog_raft_applied_index", "Highest log index applied to the store")
    last = _gauge("raftlog_raft_last_index", "Last index in the node's Raft log")
    leader = _gauge("raftlog_raft_leader_known", "1 when the node knows a leader, else 0")
    role = _gauge("raftlog_raft_role", "1 for the node's current Raft role", ("role",))
    lag = _gauge(
        "raftlog_raft_follower_lag_entries",
        "On the leader: its last index minus the follower's match index",
        ("follower",),
    )
    if view is not None:
        term.add_metric([], view.term)
        commit.add_metric([], view.commit_index)
        applied.add_metric([], view.applied_index)
        last.add_metric([], view.last_index)
        leader.add_metric([], 1 if view.leader_id else 0)
        for name in RAFT_ROLES:
            role.add_metric([name], 1 if view.role == name else 0)
        for member in _followers(view):
            lag.add_metric([member.node_id], member.lag_entries)
    return [term, commit, applied, last, leader, role, lag]


def _master_slave(view: ClusterView | None) -> list[Metric]:
    epoch = _gauge("raftlog_masterslave_epoch", "The master epoch the node knows")
    role = _gauge("raftlog_masterslave_role", "1 for the node's current role", ("role",))
    lag_bytes = _gauge(
        "raftlog_masterslave_slave_lag_bytes",
        "On the master: CommitLog bytes the slave has not acknowledged",
        ("slave",),
    )
    lag_seconds = _gauge(
        "raftlog_masterslave_slave_lag_seconds",
        "On the master: seconds since the slave last held everything it was sent (0: level)",
        ("slave",),
    )
    in_sync = _gauge(
        "raftlog_masterslave_slave_in_sync",
        "On the master: 1 when the slave is in the in-sync set",
        ("slave",),
    )
    if view is not None:
        epoch.add_metric([], view.term)
        current = "master" if view.role == "leader" else "slave"
        for name in MASTER_SLAVE_ROLES:
            role.add_metric([name], 1 if current == name else 0)
        for member in _followers(view):
            lag_bytes.add_metric([member.node_id], member.lag_bytes)
            lag_seconds.add_metric([member.node_id], member.lag_ms / 1000)
            in_sync.add_metric([member.node_id], 1 if member.in_sync else 0)
    return [epoch, role, lag_bytes, lag_seconds, in_sync]


class ReplicationCollector(Collector):
    def __init__(self, cluster_view: Callable[[], ClusterView]) -> None:
        self._cluster_view = cluster_view

    def describe(self) -> Iterable[Metric]:
        return [*_info(None), *_raft(None), *_master_slave(None)]

    def collect(self) -> Iterable[Metric]:
        view = self._cluster_view()
        mode = _master_slave if view.replication == "master-slave" else _raft
        return [*_info(view), *mode(view)]
