"""The security checks checkov makes on deploy/kubernetes, for every overlay.

checkov (3.3) passes on the rendered overlays with three skips, each explained in a comment and
a ``checkov.io/skip*`` annotation in base/statefulset.yaml. It is not in the dev extra: it
brings about 70 packages (boto3 among them, 290 MB) and would downgrade ``packaging`` in the
shared environment. So the checks that matter are made here too, always; and where a
``checkov`` executable is found (PATH, or the ``CHECKOV`` environment variable), checkov itself
runs on each overlay and must report no failed check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # no types-PyYAML in the dev extra

from tests.support.kustomize import build
from tests.unit.deploy.manifests import OVERLAYS, Manifests, node_container, overlay_dir

# The checks base/statefulset.yaml skips, each with its reason there.
SKIPPED = {"CKV_K8S_43", "CKV_K8S_15", "CKV2_K8S_6"}
CHECKOV_FLAGS = ["--framework", "kubernetes", "--skip-download", "--output", "json"]


@pytest.fixture(scope="module", params=OVERLAYS)
def pod_spec(request: pytest.FixtureRequest) -> dict[str, Any]:
    statefulset = Manifests.render(request.param).one("StatefulSet")
    spec: dict[str, Any] = statefulset["spec"]["template"]["spec"]
    return spec


def test_pod_runs_as_a_non_root_user_with_the_default_seccomp_profile(
    pod_spec: dict[str, Any],
) -> None:
    # CKV_K8S_23 (no root), CKV_K8S_40 (a high uid), CKV_K8S_31 (seccomp), CKV_K8S_38 (no token).
    security = pod_spec["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] >= 10000
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_spec["automountServiceAccountToken"] is False
    # CKV_K8S_17/18/19: no host PID, IPC or network.
    assert not any(pod_spec.get(field) for field in ("hostPID", "hostIPC", "hostNetwork"))


def test_container_is_locked_down(pod_spec: dict[str, Any]) -> None:
    container = node_container({"spec": {"template": {"spec": pod_spec}}})
    security = container["securityContext"]
    # CKV_K8S_22 read-only root, CKV_K8S_20 no escalation, CKV_K8S_37/28 capabilities dropped,
    # CKV_K8S_16 not privileged.
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert not security.get("privileged", False)
    # CKV_K8S_10..13: CPU and memory requested and limited.
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    # CKV_K8S_8/9: liveness and readiness probes (and a startup probe before them).
    assert {"startupProbe", "readinessProbe", "livenessProbe"} <= set(container)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_checkov_finds_nothing(overlay: str, tmp_path: Path) -> None:
    checkov = os.environ.get("CHECKOV") or shutil.which("checkov")
    if checkov is None:
        pytest.skip("checkov is not installed (see this module's docstring); checks made above")
    rendered = tmp_path / f"{overlay}.yaml"
    rendered.write_text(yaml.safe_dump_all(build(overlay_dir(overlay))))
    done = subprocess.run(
        [checkov, "-f", str(rendered), *CHECKOV_FLAGS],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = yaml.safe_load(done.stdout)
    skipped = {check["check_id"] for check in report["results"]["skipped_checks"]}
    assert (report["summary"]["failed"], skipped) == (0, SKIPPED), done.stdout[-3000:]
