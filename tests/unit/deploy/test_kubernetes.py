"""deploy/kubernetes: valid against the Kubernetes API schemas (strict: a misspelt field
fails), and right in what the schemas cannot see: the names, selectors, ports and peer list
that have to agree with each other and with the node's configuration rules.

Nothing here talks to a cluster (none can run on this machine): the schemas come with
kubernetes-validate, the build with ``kubectl kustomize`` when kubectl is installed, and each
pod's environment is rendered as the kubelet would and given to the node's own config loader.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # ships no py.typed
import pytest
import yaml  # type: ignore[import-untyped]  # no types-PyYAML in the dev extra

from raftlog.node.config import ConfigError, parse_address, parse_peers
from raftlog.node.config_sources import load_config
from tests.support import REPO_ROOT
from tests.unit.deploy.manifests import MANIFEST_DIR, Manifests, pod_environment, selects

# The oldest release the manifests claim (native gRPC probes and the claim retention policy
# are on by default from 1.27; 1.30 is the oldest still widely run) and the newest known.
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.latest_version())
DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile"


@pytest.fixture(scope="module")
def manifests() -> Manifests:
    return Manifests.load()


@pytest.fixture(scope="module")
def statefulset(manifests: Manifests) -> dict[str, Any]:
    return manifests.one("StatefulSet")


def node_container(statefulset: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = statefulset["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def node_port(statefulset: dict[str, Any]) -> int:
    """The container port named grpc: the one the node listens on."""
    (port,) = [p for p in node_container(statefulset)["ports"] if p["name"] == "grpc"]
    number: int = port["containerPort"]
    return number


def test_kustomization_lists_every_manifest() -> None:
    listed = set(yaml.safe_load((MANIFEST_DIR / "kustomization.yaml").read_text())["resources"])
    present = {p.name for p in MANIFEST_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid_for_kubernetes(manifests: Manifests, version: str) -> None:
    errors = []
    for file_name, obj in manifests.objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = ".".join(str(part) for part in error.path) or "(top)"
            errors.append(
                f"{file_name}: {obj['kind']}/{obj['metadata']['name']} at {where}: {error.message}"
            )
        except kubernetes_validate.SchemaNotFoundError as error:
            errors.append(f"{file_name}: {error.message}")
    if errors:
        pytest.fail(f"invalid for Kubernetes {version}:\n" + "\n".join(errors))


def test_statefulset_names_the_headless_service(
    manifests: Manifests, statefulset: dict[str, Any]
) -> None:
    headless = manifests.one("Service", statefulset["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    # Peers must resolve each other before they are ready, and while one of them is not.
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"


def test_selectors_select_the_node_pods(manifests: Manifests, statefulset: dict[str, Any]) -> None:
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    anti_affinity = statefulset["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    selectors = {
        "StatefulSet": statefulset["spec"]["selector"]["matchLabels"],
        "anti-affinity": anti_affinity["preferredDuringSchedulingIgnoredDuringExecution"][0][
            "podAffinityTerm"
        ]["labelSelector"]["matchLabels"],
    }
    for service in manifests.all_of("Service"):
        selectors[f"Service {service['metadata']['name']}"] = service["spec"]["selector"]
    for budget in manifests.all_of("PodDisruptionBudget"):
        name = f"PodDisruptionBudget {budget['metadata']['name']}"
        selectors[name] = budget["spec"]["selector"]["matchLabels"]
    assert len(selectors) == 5, sorted(selectors)
    wrong = {name: sel for name, sel in selectors.items() if not selects(sel, labels)}
    assert not wrong, f"these select no node pod (labels {labels}): {wrong}"


def test_services_and_probes_use_the_port_the_node_listens_on(
    manifests: Manifests, statefulset: dict[str, Any]
) -> None:
    container = node_container(statefulset)
    env = pod_environment(manifests, container, "raftlog-0", manifests.namespace)
    _, listen_port = parse_address(env["RAFTLOG_LISTEN_ADDRESS"], "RAFTLOG_LISTEN_ADDRESS")
    assert node_port(statefulset) == listen_port
    probes = ("startupProbe", "readinessProbe", "livenessProbe")
    # Native gRPC probes on grpc.health.v1 (the node serves the overall service "").
    assert {name: container[name]["grpc"].get("service", "") for name in probes} == dict.fromkeys(
        probes, ""
    )
    assert {name: container[name]["grpc"]["port"] for name in probes} == dict.fromkeys(
        probes, listen_port
    )
    for service in manifests.all_of("Service"):
        (port,) = service["spec"]["ports"]
        assert port["targetPort"] in ("grpc", listen_port), service["metadata"]["name"]


def test_peer_list_names_every_pod_by_its_stable_dns_name(
    manifests: Manifests, statefulset: dict[str, Any]
) -> None:
    container = node_container(statefulset)
    env = pod_environment(manifests, container, "raftlog-0", manifests.namespace)
    name = statefulset["metadata"]["name"]
    headless = statefulset["spec"]["serviceName"]
    port = node_port(statefulset)
    expected = {
        f"{name}-{ordinal}": f"{name}-{ordinal}.{headless}.{manifests.namespace}.svc:{port}"
        for ordinal in range(statefulset["spec"]["replicas"])
    }
    assert parse_peers(env["RAFTLOG_PEERS"]) == expected


def test_each_pod_starts_a_node_with_its_name_as_id(
    manifests: Manifests, statefulset: dict[str, Any], tmp_path: Path
) -> None:
    """The environment each pod gets passes the node's own validation: the pod name is a valid
    node id, and the advertised address is that node's entry in the peer list."""
    container = node_container(statefulset)
    (mount,) = [
        m
        for m in container["volumeMounts"]
        if m["name"] == statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    ]
    name = statefulset["metadata"]["name"]
    for ordinal in range(statefulset["spec"]["replicas"]):
        pod = f"{name}-{ordinal}"
        env = pod_environment(manifests, container, pod, manifests.namespace)
        assert env["RAFTLOG_DATA_DIR"] == mount["mountPath"]
        # /data does not exist here: only the data directory is swapped for a writable one.
        config = load_config(None, env, {"data_dir": str(tmp_path)})
        assert config.node_id == pod
        assert config.advertised == config.peers[pod]
        assert config.advertised.startswith(f"{pod}.")


def test_a_pod_in_another_namespace_is_refused(
    manifests: Manifests, statefulset: dict[str, Any], tmp_path: Path
) -> None:
    """The peer list names the namespace: moved elsewhere without changing it, a node refuses
    to start (and says why) instead of advertising a name its peers do not know."""
    env = pod_environment(manifests, node_container(statefulset), "raftlog-1", "elsewhere")
    with pytest.raises(ConfigError, match=r"peers\[raftlog-1\].*differs from advertise_address"):
        load_config(None, env, {"data_dir": str(tmp_path)})


def test_node_runs_as_the_image_user(statefulset: dict[str, Any]) -> None:
    match = re.search(r"^ARG RAFTLOG_UID=(\d+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match is not None, "deploy/Dockerfile no longer sets ARG RAFTLOG_UID"
    uid = int(match.group(1))
    security = statefulset["spec"]["template"]["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True
    # fsGroup: the claim's files belong to the group the node runs in, so it can write them.
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (uid,) * 3


def kustomize(directory: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: kustomize build not checked")
    built = subprocess.run(
        [kubectl, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return [obj for obj in yaml.safe_load_all(built.stdout) if obj]


def test_kustomize_builds_every_object_into_the_namespace(manifests: Manifests) -> None:
    built = kustomize(MANIFEST_DIR)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in built) == sorted(
        (o["kind"], o["metadata"]["name"]) for _, o in manifests.objects
    )
    assert {o["metadata"].get("namespace") for o in built} == {manifests.namespace}


def test_delete_by_kustomization_keeps_the_data(manifests: Manifests) -> None:
    """`kubectl delete -k` deletes what the kustomization lists: neither the claims nor the
    namespace (deleting it would delete the claims in it)."""
    kinds = {obj["kind"] for _, obj in manifests.objects}
    assert not kinds & {"Namespace", "PersistentVolumeClaim"}
    retention = manifests.one("StatefulSet")["spec"]["persistentVolumeClaimRetentionPolicy"]
    assert retention == {"whenDeleted": "Retain", "whenScaled": "Retain"}


def test_kustomize_overlay_replaces_the_image(tmp_path: Path) -> None:
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # kustomize refuses an absolute path to a base.
        "resources": [os.path.relpath(MANIFEST_DIR, tmp_path)],
        "images": [{"name": "raftlog", "newName": "registry.example/raftlog", "newTag": "1.0"}],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    (statefulset,) = [o for o in kustomize(tmp_path) if o["kind"] == "StatefulSet"]
    assert node_container(statefulset)["image"] == "registry.example/raftlog:1.0"
