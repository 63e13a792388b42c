"""deploy/kubernetes/monitoring (Prometheus Operator examples, outside the kustomization) and
the metrics port of the StatefulSet: the port the node listens on for metrics is the container
port named ``metrics``, and the PodMonitor, the ServiceMonitor and its Service all reach it.

The PodMonitor and ServiceMonitor are CRDs, absent from the core schemas kubernetes-validate
knows: their fields are checked here by hand; the Service beside them is validated strictly.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # ships no py.typed
import pytest
import yaml  # type: ignore[import-untyped]  # no types-PyYAML in the dev extra

from raftlog.node.config import parse_address
from tests.unit.deploy.manifests import (
    MANIFEST_DIR,
    Manifests,
    node_container,
    pod_environment,
    selects,
)
from tests.unit.deploy.test_kubernetes import KUBERNETES_VERSIONS

MONITORING_DIR = MANIFEST_DIR / "monitoring"
OPERATOR_API = "monitoring.coreos.com/v1"


def load(name: str) -> dict[str, dict[str, Any]]:
    """The objects of one monitoring file, by kind."""
    with (MONITORING_DIR / name).open() as handle:
        return {doc["kind"]: doc for doc in yaml.safe_load_all(handle) if doc}


@pytest.fixture(scope="module")
def manifests() -> Manifests:
    return Manifests.render("dev")


@pytest.fixture(scope="module")
def pod_labels(manifests: Manifests) -> dict[str, str]:
    labels: dict[str, str] = manifests.one("StatefulSet")["spec"]["template"]["metadata"]["labels"]
    return labels


def test_the_metrics_port_is_the_one_the_node_serves_metrics_on(manifests: Manifests) -> None:
    container = node_container(manifests.one("StatefulSet"))
    env = pod_environment(manifests, container, "raftlog-0")
    host, port = parse_address(env["RAFTLOG_METRICS_LISTEN"], "RAFTLOG_METRICS_LISTEN")
    # Prometheus scrapes the pod IP: the endpoint must listen on every interface.
    assert host == "0.0.0.0"
    (declared,) = [p for p in container["ports"] if p["name"] == "metrics"]
    assert declared["containerPort"] == port


def test_pod_monitor_scrapes_the_node_pods_on_the_metrics_port(
    pod_labels: dict[str, str],
) -> None:
    monitor = load("podmonitor.yaml")["PodMonitor"]
    assert monitor["apiVersion"] == OPERATOR_API
    assert selects(monitor["spec"]["selector"]["matchLabels"], pod_labels)
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_metrics_service_is_valid_for_kubernetes(version: str) -> None:
    kubernetes_validate.validate(load("servicemonitor.yaml")["Service"], version, strict=True)


def test_service_monitor_reaches_the_pods_through_its_service(
    pod_labels: dict[str, str],
) -> None:
    objects = load("servicemonitor.yaml")
    service, monitor = objects["Service"], objects["ServiceMonitor"]
    assert selects(service["spec"]["selector"], pod_labels)
    (port,) = service["spec"]["ports"]
    assert (port["name"], port["targetPort"]) == ("metrics", "metrics")
    assert monitor["apiVersion"] == OPERATOR_API
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
