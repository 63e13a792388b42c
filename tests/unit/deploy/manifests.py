"""deploy/kubernetes read as Kubernetes reads it, for the tests beside this module and the
pod-shaped container tests (tests/containers/test_kubernetes_pods.py).

``Manifests.render(overlay)`` builds one overlay (tests/support/kustomize.py, compared with
``kubectl kustomize`` where kubectl exists) and finds its objects by kind and name; ``tls``
says whether it includes components/tls (the node's TLS files in its environment).
``pod_environment`` builds the environment one StatefulSet pod's container gets: ``envFrom``
ConfigMaps, then ``env`` with the downward API (``fieldRef``) and the ``$(VAR)`` expansion the
kubelet does. ``run_shell`` runs a container's shell script (its start command, its preStop
hook) on this machine with a stand-in ``raftlog`` on PATH, so a test sees what the script does.

Rules it keeps: only what the manifests use is understood; anything else (a ``secretRef``, a
``fieldPath`` other than the pod's name, namespace and, when given, IP) fails with a message
naming it, so a manifest change the helpers cannot model is never read as "no value".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import REPO_ROOT
from tests.support.kustomize import build

MANIFEST_DIR = REPO_ROOT / "deploy" / "kubernetes"
BASE_DIR = MANIFEST_DIR / "base"
TLS_COMPONENT_DIR = MANIFEST_DIR / "components" / "tls"
# dev-tls: dev with components/tls.
OVERLAYS = ("dev", "prod", "dev-tls")

# The kubelet's expansion: "$$" is a literal "$", "$(NAME)" a variable defined before; a
# reference to an undefined variable stays as written.
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

Object = dict[str, Any]


@dataclass(frozen=True)
class Manifests:
    """Every object one kustomization renders."""

    objects: list[Object]

    @classmethod
    def render(cls, overlay: str) -> Manifests:
        return cls(build(overlay_dir(overlay)))

    @property
    def namespace(self) -> str:
        (namespace,) = {obj["metadata"]["namespace"] for obj in self.objects}
        assert isinstance(namespace, str)
        return namespace

    @property
    def tls(self) -> bool:
        """Whether the nodes serve TLS: their environment names a certificate."""
        names = {v["name"] for v in node_container(self.one("StatefulSet")).get("env", [])}
        return "RAFTLOG_TLS_CERT_FILE" in names

    def all_of(self, kind: str) -> list[Object]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> Object:
        """The object of ``kind`` (named ``name``, if given); fails unless exactly one."""
        found = [
            obj for obj in self.all_of(kind) if name is None or obj["metadata"]["name"] == name
        ]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
        return found[0]


def overlay_dir(overlay: str) -> Path:
    return MANIFEST_DIR / "overlays" / overlay


def node_container(statefulset: Object) -> Object:
    """The StatefulSet's one container, the node."""
    containers: list[Object] = statefulset["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """A non-empty equality selector that ``labels`` satisfy (an empty one selects all: a bug
    here, so it counts as selecting nothing)."""
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def _expand(text: str, env: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _REFERENCE.sub(replace, text)


def pod_environment(
    manifests: Manifests, container: Object, pod_name: str, pod_ip: str | None = None
) -> dict[str, str]:
    """The environment of ``container`` in the pod ``pod_name``; ``status.podIP`` is
    ``pod_ip`` (None: the manifests must not ask for it, as a pod's IP is known only once its
    container runs)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert set(source) == {"configMapRef"}, f"envFrom {source} is not modelled here"
        config_map = manifests.one("ConfigMap", source["configMapRef"]["name"])
        env.update(config_map["data"])
    fields = {"metadata.name": pod_name, "metadata.namespace": manifests.namespace}
    if pod_ip is not None:
        fields["status.podIP"] = pod_ip
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = _expand(variable["value"], env)
            continue
        assert set(variable["valueFrom"]) == {"fieldRef"}, f"env {variable} is not modelled here"
        field_path = variable["valueFrom"]["fieldRef"]["fieldPath"]
        assert field_path in fields, f"fieldRef {field_path} is not modelled here"
        env[variable["name"]] = fields[field_path]
    return env


def container_argv(container: Object, env: Mapping[str, str]) -> list[str]:
    """``command`` + ``args`` as the kubelet runs them: ``$(VAR)`` expanded from ``env``."""
    return [_expand(part, env) for part in container["command"] + container.get("args", [])]


def run_shell(
    argv: list[str], env: Mapping[str, str], raftlog_script: str, bin_dir: Path
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Run a container's ``argv`` (``/bin/sh -c SCRIPT``) here, with ``raftlog`` on PATH being
    ``raftlog_script`` (a shell script). Each call of that stand-in is recorded: its arguments
    and the environment it got, returned in call order."""
    calls = bin_dir / "calls.jsonl"
    recorder = bin_dir / "record.py"
    recorder.write_text(
        "import json, os, sys\n"
        f"with open({str(calls)!r}, 'a') as f:\n"
        "    f.write(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}) + '\\n')\n"
    )
    stand_in = bin_dir / "raftlog"
    stand_in.write_text(f'#!/bin/sh\npython3 {recorder} "$@"\n{raftlog_script}\n')
    stand_in.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        argv, env={**env, "PATH": path}, capture_output=True, text=True, timeout=30, check=False
    )
    lines = calls.read_text().splitlines() if calls.exists() else []
    return done, [json.loads(line) for line in lines]
