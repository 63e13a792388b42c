"""node/metrics without a cluster: the replication collector's samples for each mode and
role, the endpoint's URL and lifecycle, the ``metrics_listen`` setting, and that the metric
names the docs list, the node exports and the Grafana dashboard queries are the same set."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from raftlog.node.config import ConfigError
from raftlog.node.config_sources import load_config
from raftlog.node.metrics.endpoint import MetricsEndpoint
from raftlog.node.metrics.node_metrics import node_registry
from raftlog.node.metrics.replication_collector import ReplicationCollector
from raftlog.node.write_path import ClusterView, MemberView
from tests.support import REPO_ROOT

DOCS = REPO_ROOT / "docs" / "operations.md"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "raftlog-dashboard.json"


def view(**fields: Any) -> ClusterView:
    defaults: dict[str, Any] = dict(
        cluster_id="c",
        node_id="n1",
        role="leader",
        leader_id="n1",
        leader_address="h:1",
        term=4,
        commit_index=10,
        applied_index=9,
        last_index=12,
        members=[
            MemberView("n1", "h:1", "leader", True, has_progress=True),
            MemberView("n2", "h:2", "follower", True, has_progress=True, lag_entries=3),
            MemberView("n3", "h:3", "learner", False, has_progress=True, lag_entries=40),
        ],
        transferring_to=None,
    )
    return ClusterView(**{**defaults, **fields})


def samples(families: Any) -> dict[tuple[str, tuple[str, ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.values()))): s.value for f in families for s in f.samples
    }


def test_raft_leader_reports_term_indexes_role_and_each_follower_lag() -> None:
    found = samples(ReplicationCollector(view).collect())
    assert found[("raftlog_raft_term", ())] == 4
    assert found[("raftlog_raft_commit_index", ())] == 10
    assert found[("raftlog_raft_applied_index", ())] == 9
    assert found[("raftlog_raft_role", ("leader",))] == 1
    assert found[("raftlog_raft_role", ("follower",))] == 0
    lags = {k[1]: v for k, v in found.items() if k[0] == "raftlog_raft_follower_lag_entries"}
    assert lags == {("n2",): 3, ("n3",): 40}
    assert not any(name.startswith("raftlog_masterslave") for name, _ in found)


def test_a_follower_reports_no_lag_and_no_leader_when_none_is_known() -> None:
    follower = view(role="candidate", leader_id=None, members=[MemberView("n1", "h", "x", True)])
    found = samples(ReplicationCollector(lambda: follower).collect())
    assert found[("raftlog_raft_leader_known", ())] == 0
    assert found[("raftlog_raft_role", ("candidate",))] == 1
    assert not [k for k in found if k[0] == "raftlog_raft_follower_lag_entries"]


def test_master_reports_epoch_role_and_each_slave_lag_in_bytes_and_seconds() -> None:
    master = view(
        replication="master-slave",
        term=7,
        members=[
            MemberView("n1", "h:1", "leader", True, in_sync=True),
            MemberView("n2", "h:2", "follower", True, True, lag_bytes=512, lag_ms=1500),
        ],
    )
    found = samples(ReplicationCollector(lambda: master).collect())
    assert found[("raftlog_masterslave_epoch", ())] == 7
    assert found[("raftlog_masterslave_role", ("master",))] == 1
    assert found[("raftlog_masterslave_slave_lag_bytes", ("n2",))] == 512
    assert found[("raftlog_masterslave_slave_lag_seconds", ("n2",))] == 1.5
    assert found[("raftlog_masterslave_slave_in_sync", ("n2",))] == 0
    assert not any(name.startswith("raftlog_raft") for name, _ in found)


def _exported_names() -> set[str]:
    """Every raftlog_ series name a node can export (both replication modes), counters with
    their _total."""
    store = SimpleNamespace(
        commit_log=SimpleNamespace(max_offset=0, min_offset=0, segment_count=1, on_fsync=None),
        list_topics=list,
        consumer_offsets=dict,
    )
    registry, _ = node_registry(store, SimpleNamespace(cluster_view=view))  # type: ignore[arg-type]
    families: list[Metric] = [*registry.collect(), *ReplicationCollector(view).describe()]
    return {
        f.name + ("_total" if f.type == "counter" else "")
        for f in families
        if f.name.startswith("raftlog_")
    }


def test_docs_list_every_metric_the_node_exports() -> None:
    section = DOCS.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(raftlog_[a-z_]+)` \|", section, re.MULTILINE))
    assert documented == _exported_names()


def test_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for expr in exprs
        for name in re.findall(r"raftlog_[a-z_]+", expr)
    }
    assert used and used <= _exported_names(), used - _exported_names()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert {p["datasource"]["uid"] for p in panels} == {"${datasource}"}
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def test_endpoint_serves_on_a_free_port_until_stopped() -> None:
    endpoint = MetricsEndpoint("127.0.0.1:0", CollectorRegistry(), "ignored.example")
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", endpoint.url)
    endpoint.start()
    try:
        with urllib.request.urlopen(endpoint.url, timeout=5) as response:
            assert response.status == 200
    finally:
        endpoint.stop()


def test_endpoint_on_a_wildcard_host_names_the_advertised_one() -> None:
    endpoint = MetricsEndpoint("0.0.0.0:0", CollectorRegistry(), "raftlog-0.example")
    try:
        assert endpoint.url.startswith("http://raftlog-0.example:")
    finally:
        endpoint.stop()


def _config(tmp_path: Path, env: dict[str, str], **overrides: str) -> Any:
    base = {"node_id": "n1", "listen_address": "127.0.0.1:7701", "peers": "n1=127.0.0.1:7701"}
    return load_config(None, env, {**base, "data_dir": str(tmp_path), **overrides})


def test_metrics_listen_is_off_by_default_and_read_from_flag_or_env(tmp_path: Path) -> None:
    assert _config(tmp_path, {}).metrics_listen is None
    env = {"RAFTLOG_METRICS_LISTEN": "0.0.0.0:9701"}
    assert _config(tmp_path, env).metrics_listen == "0.0.0.0:9701"
    assert _config(tmp_path, env, metrics_listen="[::1]:0").metrics_listen == "[::1]:0"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("9701", "not of the form host:port"),
        ("127.0.0.1:70000", "it must be 0..65535"),
        ("127.0.0.1:7701", "is the listen address"),
    ],
)
def test_a_bad_metrics_listen_names_the_setting(tmp_path: Path, value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=rf"^metrics_listen: .*{problem}.*--metrics-listen"):
        _config(tmp_path, {}, metrics_listen=value)
