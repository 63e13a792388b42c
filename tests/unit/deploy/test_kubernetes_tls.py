"""deploy/kubernetes/components/tls, as the dev-tls overlay renders it and as any overlay
would: the Secret mounted read-only where the node's TLS settings point, each pod naming its
own certificate and key; the node's config loader taking that environment; the exec probes
passing against a TLS node (with client certificates required, and without) whose certificate
names the node id and its DNS names but not the loopback address the probe dials; and the
component applying to the prod overlay as well.

The TLS node is a gRPC health server on this machine (tests/support/tls_health.py) with a
development CA's certificates (testing/dev_ca.py) in place of the Secret's files; the probe
runs as the kubelet runs it: the container's command with the pod's environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # ships no py.typed
import pytest
import yaml  # type: ignore[import-untyped]  # no types-PyYAML in the dev extra

from raftlog.client import ClientTls
from raftlog.node.config_sources import load_config
from raftlog.testing import dev_ca
from tests.support.kustomize import build
from tests.support.tls_health import tls_health_server
from tests.unit.deploy.manifests import (
    TLS_COMPONENT_DIR,
    Manifests,
    node_container,
    overlay_dir,
    pod_environment,
)

SECRET = "raftlog-tls"
MOUNT_PATH = "/etc/raftlog/tls"
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


@pytest.fixture(scope="module")
def manifests() -> Manifests:
    return Manifests.render("dev-tls")


@pytest.fixture(scope="module")
def statefulset(manifests: Manifests) -> dict[str, Any]:
    return manifests.one("StatefulSet")


def test_the_secret_is_mounted_read_only_where_the_settings_point(
    manifests: Manifests, statefulset: dict[str, Any]
) -> None:
    pod_spec = statefulset["spec"]["template"]["spec"]
    (volume,) = [v for v in pod_spec["volumes"] if "secret" in v]
    # Keys readable by the node's group only (root owns them, fsGroup is their group).
    assert volume["secret"] == {"secretName": SECRET, "defaultMode": 0o440}
    (mount,) = [
        m for m in node_container(statefulset)["volumeMounts"] if m["name"] == volume["name"]
    ]
    # A directory, not subPath: an updated Secret reaches the pod (the node reloads it).
    assert mount == {"name": volume["name"], "mountPath": MOUNT_PATH, "readOnly": True}
    for ordinal in (0, 2, 4):
        pod = f"raftlog-{ordinal}"
        env = pod_environment(manifests, node_container(statefulset), pod)
        assert env["RAFTLOG_TLS_CA_FILE"] == f"{MOUNT_PATH}/ca.pem"
        assert env["RAFTLOG_TLS_CERT_FILE"] == f"{MOUNT_PATH}/{pod}.pem"
        assert env["RAFTLOG_TLS_KEY_FILE"] == f"{MOUNT_PATH}/{pod}.key"
        # The CLI in the pod (preStop, kubectl exec) dials TLS as this node.
        assert ClientTls.from_env(env) == ClientTls(
            f"{MOUNT_PATH}/ca.pem", f"{MOUNT_PATH}/{pod}.pem", f"{MOUNT_PATH}/{pod}.key"
        )


def test_the_node_takes_the_tls_environment(
    manifests: Manifests, statefulset: dict[str, Any], tmp_path: Path
) -> None:
    env = pod_environment(manifests, node_container(statefulset), "raftlog-1")
    config = load_config(None, env, {"data_dir": str(tmp_path)})
    assert config.tls_enabled
    assert (config.tls_ca_file, config.tls_cert_file, config.tls_key_file) == (
        f"{MOUNT_PATH}/ca.pem",
        f"{MOUNT_PATH}/raftlog-1.pem",
        f"{MOUNT_PATH}/raftlog-1.key",
    )
    # Client certificates stay optional unless the overlay's ConfigMap asks for them.
    assert config.tls_client_auth_enable is False


@pytest.fixture(scope="module")
def secret_files(tmp_path_factory: pytest.TempPathFactory, manifests: Manifests) -> Path:
    """The Secret's files as docs/kubernetes.md says to make them: the node id and DNS names
    (the stable name, the client Service), no loopback address."""
    directory = tmp_path_factory.mktemp("secret")
    namespace = manifests.namespace
    dev_ca.init_ca(str(directory))
    for ordinal in range(3):
        pod = f"raftlog-{ordinal}"
        names = (f"{pod}.raftlog-headless.{namespace}.svc", f"raftlog.{namespace}.svc", "raftlog")
        dev_ca.issue(str(directory), pod, names)
    (directory / "ca.key").unlink()  # the CA's key never goes into the Secret
    return directory


@pytest.fixture(params=[False, True], ids=["server-auth", "client-auth"])
def node_port(request: pytest.FixtureRequest, secret_files: Path) -> Iterator[int]:
    with tls_health_server(secret_files, "raftlog-0", client_auth=request.param) as port:
        yield port


@pytest.mark.parametrize("probe", PROBES)
def test_the_exec_probes_pass_against_a_tls_node(
    manifests: Manifests,
    statefulset: dict[str, Any],
    secret_files: Path,
    node_port: int,
    probe: str,
) -> None:
    container = node_container(statefulset)
    env = pod_environment(manifests, container, "raftlog-0")
    # The Secret's files are here instead of at the mount path; the node listens on node_port.
    env = {key: value.replace(MOUNT_PATH, str(secret_files)) for key, value in env.items()}
    env["RAFTLOG_LISTEN_ADDRESS"] = f"0.0.0.0:{node_port}"
    command = container[probe]["exec"]["command"]
    assert command[0] == "python3"
    # python3 as in the image: one with raftlog installed.
    done = subprocess.run(
        [sys.executable, *command[1:]],
        env=env,
        capture_output=True,
        text=True,
        timeout=container[probe]["timeoutSeconds"] + 10,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    # And without the pod's TLS settings the same probe fails: the port really is TLS.
    plain = {k: v for k, v in env.items() if not k.startswith("RAFTLOG_TLS_")}
    refused = subprocess.run(
        [sys.executable, *command[1:]],
        env=plain,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode == 1


def test_the_component_applies_to_the_prod_overlay_too(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [str(overlay_dir("prod"))],
                "components": [str(TLS_COMPONENT_DIR)],
            }
        )
    )
    prod_tls = Manifests(build(tmp_path))
    assert prod_tls.tls and prod_tls.namespace == "raftlog"
    statefulset = prod_tls.one("StatefulSet")
    for version in ("1.30", kubernetes_validate.latest_version()):
        kubernetes_validate.validate(statefulset, version, strict=True)
    env = pod_environment(prod_tls, node_container(statefulset), "raftlog-0")
    assert env["RAFTLOG_TLS_CERT_FILE"] == f"{MOUNT_PATH}/raftlog-0.pem"
    # Everything else is prod's: the resources, the image.
    prod = Manifests.render("prod").one("StatefulSet")
    assert node_container(statefulset)["resources"] == node_container(prod)["resources"]
    assert node_container(statefulset)["image"] == node_container(prod)["image"]
