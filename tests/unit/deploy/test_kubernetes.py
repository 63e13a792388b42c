"""deploy/kubernetes: every overlay renders, is valid against the Kubernetes API schemas
(strict: a misspelt field fails), passes the security checks checkov would make, and is right in
what the schemas cannot see: the names, selectors, ports, peer list, start command and preStop
hook that have to agree with each other and with the node's configuration rules. The overlays
include dev-tls (dev with components/tls), whose TLS specifics are test_kubernetes_tls.py's.

Nothing here talks to a cluster (none can run on this machine): the schemas come with
kubernetes-validate, the build from tests/support/kustomize.py (checked against ``kubectl
kustomize`` when kubectl is installed), and each pod's environment is rendered as the kubelet
would, run through the container's own start script, and given to the node's config loader.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # ships no py.typed
import pytest
import yaml  # type: ignore[import-untyped]  # no types-PyYAML in the dev extra

from raftlog.cli.health import default_address
from raftlog.node.config import parse_address, parse_peers
from raftlog.node.config_sources import load_config
from tests.support import REPO_ROOT
from tests.support.kustomize import build
from tests.unit.deploy.manifests import (
    BASE_DIR,
    OVERLAYS,
    Manifests,
    container_argv,
    node_container,
    overlay_dir,
    pod_environment,
    run_shell,
    selects,
)

# The oldest release the manifests claim (native gRPC probes and the claim retention policy
# are on by default from 1.27; 1.30 is the oldest still widely run) and the newest known.
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.latest_version())
DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile"
# The static voters, raftlog-0..2; a higher ordinal joins them.
STATIC_VOTERS = 3
# The exec probes of components/tls run the image's health check.
HEALTH_CHECK = ["python3", "-m", "raftlog.cli.health"]


@pytest.fixture(scope="module", params=OVERLAYS)
def manifests(request: pytest.FixtureRequest) -> Manifests:
    return Manifests.render(request.param)


@pytest.fixture(scope="module")
def statefulset(manifests: Manifests) -> dict[str, Any]:
    return manifests.one("StatefulSet")


def node_port(statefulset: dict[str, Any]) -> int:
    """The container port named grpc: the one the node listens on."""
    (port,) = [p for p in node_container(statefulset)["ports"] if p["name"] == "grpc"]
    number: int = port["containerPort"]
    return number


def test_base_lists_every_manifest_and_names_no_namespace() -> None:
    listed = set(yaml.safe_load((BASE_DIR / "kustomization.yaml").read_text())["resources"])
    present = {p.name for p in BASE_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present
    assert not [o for o in build(BASE_DIR) if "namespace" in o["metadata"]]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid_for_kubernetes(manifests: Manifests, version: str) -> None:
    errors = []
    for obj in manifests.objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = ".".join(str(part) for part in error.path) or "(top)"
            errors.append(f"{obj['kind']}/{obj['metadata']['name']} at {where}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            errors.append(f"{obj['kind']}: {error.message}")
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
    env = pod_environment(manifests, container, "raftlog-0")
    _, listen_port = parse_address(env["RAFTLOG_LISTEN_ADDRESS"], "RAFTLOG_LISTEN_ADDRESS")
    assert node_port(statefulset) == listen_port
    probes = ("startupProbe", "readinessProbe", "livenessProbe")
    if manifests.tls:
        # The kubelet's gRPC probe dials plain TCP only: exec probes of the health check, which
        # dials RAFTLOG_LISTEN_ADDRESS (wildcard host -> loopback), service "".
        for name in probes:
            assert container[name]["exec"]["command"][:3] == HEALTH_CHECK, name
            assert "--address" not in container[name]["exec"]["command"], name
            assert "--service" not in container[name]["exec"]["command"], name
        assert default_address(env) == f"127.0.0.1:{listen_port}"
        probes = ()
    # Native gRPC probes on grpc.health.v1 (the node serves the overall service "").
    assert {name: container[name]["grpc"].get("service", "") for name in probes} == dict.fromkeys(
        probes, ""
    )
    assert {name: container[name]["grpc"]["port"] for name in probes} == dict.fromkeys(
        probes, listen_port
    )
    container_ports = {port["name"] for port in container["ports"]}
    for service in manifests.all_of("Service"):
        ports = {port["name"]: port["targetPort"] for port in service["spec"]["ports"]}
        assert ports["grpc"] in ("grpc", listen_port), service["metadata"]["name"]
        assert set(ports.values()) - {listen_port} <= container_ports, ports


def test_peer_list_names_every_static_voter_by_its_stable_dns_name(
    manifests: Manifests, statefulset: dict[str, Any]
) -> None:
    env = pod_environment(manifests, node_container(statefulset), "raftlog-0")
    name = statefulset["metadata"]["name"]
    headless = statefulset["spec"]["serviceName"]
    port = node_port(statefulset)
    expected = {
        f"{name}-{ordinal}": f"{name}-{ordinal}.{headless}.{manifests.namespace}.svc:{port}"
        for ordinal in range(STATIC_VOTERS)
    }
    assert statefulset["spec"]["replicas"] == STATIC_VOTERS
    assert parse_peers(env["RAFTLOG_PEERS"]) == expected


def start_environment(
    manifests: Manifests, container: dict[str, Any], pod: str, tmp_path: Path
) -> dict[str, str]:
    """The environment ``raftlog node start`` gets in ``pod``: the pod's, changed by the
    container's start script (run here with a stand-in ``raftlog``)."""
    bin_dir = tmp_path / pod
    bin_dir.mkdir()
    env = pod_environment(manifests, container, pod)
    done, calls = run_shell(container_argv(container, env), env, "", bin_dir)
    assert done.returncode == 0, done.stderr
    (call,) = calls
    assert call["argv"] == ["node", "start"]
    started: dict[str, str] = call["env"]
    return started


@pytest.mark.parametrize("ordinal", [0, 2, 3, 4])
def test_each_pod_starts_a_node_with_its_name_as_id(
    manifests: Manifests, statefulset: dict[str, Any], tmp_path: Path, ordinal: int
) -> None:
    """The environment each pod's node starts with passes the node's own validation: the pod
    name is the node id, the advertised address its stable name; pods 0..2 are the static
    voters, a higher ordinal (a scale-up) joins through them with itself as its only peer."""
    container = node_container(statefulset)
    (mount,) = [
        m
        for m in container["volumeMounts"]
        if m["name"] == statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    ]
    pod = f"{statefulset['metadata']['name']}-{ordinal}"
    env = start_environment(manifests, container, pod, tmp_path)
    assert env["RAFTLOG_DATA_DIR"] == mount["mountPath"]
    # /data does not exist here: only the data directory is swapped for a writable one.
    config = load_config(None, env, {"data_dir": str(tmp_path)})
    assert config.node_id == pod
    assert config.advertised == config.peers[pod]
    assert config.advertised == f"{pod}.raftlog-headless.{manifests.namespace}.svc:7701"
    static = parse_peers(pod_environment(manifests, container, pod)["RAFTLOG_PEERS"])
    if ordinal < STATIC_VOTERS:
        assert (config.peers, config.join) == (static, None)
    else:
        assert config.peers == {pod: config.advertised}
        assert config.join_addresses == tuple(static.values())


@pytest.mark.parametrize(("role", "transfers"), [("leader", True), ("", False)])
def test_pre_stop_hands_leadership_over_only_from_the_leader(
    manifests: Manifests, statefulset: dict[str, Any], tmp_path: Path, role: str, transfers: bool
) -> None:
    container = node_container(statefulset)
    env = pod_environment(manifests, container, "raftlog-1")
    # The stand-in answers `member list` as the CLI prints it (raftlog/cli/member.py).
    members = (
        f"NODE       ADDRESS  ROLE\nraftlog-0  a:1      voter\nraftlog-1  b:1      voter  {role}"
    )
    stand_in = f'[ "$2" = list ] && printf \'%s\\n\' "{members}"; exit 0'
    hook = container["lifecycle"]["preStop"]["exec"]["command"]
    done, calls = run_shell(hook, env, stand_in, tmp_path)
    assert done.returncode == 0, done.stderr
    # With TLS the hook dials the pod's stable name, which its certificate carries (loopback
    # need not be in it); the CLI takes its TLS settings from RAFTLOG_TLS_CA/CERT/KEY.
    server = env["RAFTLOG_ADVERTISE_ADDRESS"] if manifests.tls else "127.0.0.1:7701"
    listed = ["member", "list", "--servers", server, "--timeout-s", "3"]
    transfer = ["leader", "transfer", "--servers", server, "--timeout-s", "10"]
    assert [c["argv"] for c in calls] == [listed, transfer] if transfers else [listed]
    for call in calls:
        tls = {key: call["env"].get(f"RAFTLOG_TLS_{key}") for key in ("CA", "CERT", "KEY")}
        if manifests.tls:
            assert tls == {key: env[f"RAFTLOG_TLS_{key}_FILE"] for key in tls}
        else:
            assert tls == dict.fromkeys(tls)
    # The hand-over must fit in the grace period, with the stop after it.
    assert statefulset["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 10 + 4 + 3


def test_resources_are_requested_and_limited(
    manifests: Manifests, statefulset: dict[str, Any]
) -> None:
    resources = node_container(statefulset)["resources"]
    assert set(resources) == {"requests", "limits"}
    for kind in ("requests", "limits"):
        assert set(resources[kind]) == {"cpu", "memory"}, kind
    storage = statefulset["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]
    if manifests.namespace == "raftlog-dev":
        assert (resources["limits"]["cpu"], storage["storage"]) == ("1", "1Gi")


def test_node_runs_as_the_image_user(statefulset: dict[str, Any]) -> None:
    match = re.search(r"^ARG RAFTLOG_UID=(\d+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match is not None, "deploy/Dockerfile no longer sets ARG RAFTLOG_UID"
    uid = int(match.group(1))
    security = statefulset["spec"]["template"]["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True
    # fsGroup: the claim's files belong to the group the node runs in, so it can write them.
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (uid,) * 3


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_renderer_agrees_with_kubectl_kustomize(overlay: str) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: tests/support/kustomize.py not compared with it")
    built = subprocess.run(
        [kubectl, "kustomize", str(overlay_dir(overlay))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr

    def by_name(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
        return {(o["kind"], o["metadata"]["name"]): o for o in objects}

    assert by_name(build(overlay_dir(overlay))) == by_name(
        [o for o in yaml.safe_load_all(built.stdout) if o]
    )


def test_delete_by_kustomization_keeps_the_data(manifests: Manifests) -> None:
    """`kubectl delete -k` deletes what the kustomization lists: neither the claims nor the
    namespace (deleting it would delete the claims in it)."""
    kinds = {obj["kind"] for obj in manifests.objects}
    assert not kinds & {"Namespace", "PersistentVolumeClaim"}
    retention = manifests.one("StatefulSet")["spec"]["persistentVolumeClaimRetentionPolicy"]
    assert retention == {"whenDeleted": "Retain", "whenScaled": "Retain"}


def test_overlays_set_their_namespace_and_image() -> None:
    dev, prod = (Manifests.render(overlay) for overlay in ("dev", "prod"))
    assert (dev.namespace, prod.namespace) == ("raftlog-dev", "raftlog")
    assert node_container(dev.one("StatefulSet"))["image"] == "raftlog:dev"
    assert node_container(prod.one("StatefulSet"))["image"] == "registry.example/raftlog:0.1.0"
