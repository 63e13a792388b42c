"""deploy/kubernetes read as Kubernetes reads it, for the tests beside this module.

``Manifests`` loads every object of the kustomization's resources with PyYAML and finds them
by kind and name. ``pod_environment`` builds the environment one StatefulSet pod's container
gets: ``envFrom`` ConfigMaps, then ``env`` with the downward API (``fieldRef``) and the
``$(VAR)`` expansion the kubelet does, so a test can hand it to the node's real config loader.

Rules it keeps: only what the manifests use is understood; anything else (a ``secretRef``, a
``fieldPath`` other than the pod's name and namespace) fails with a message naming it, so a
manifest change the helpers cannot model is never read as "no value".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # no types-PyYAML in the dev extra

from tests.support import REPO_ROOT

MANIFEST_DIR = REPO_ROOT / "deploy" / "kubernetes"
KUSTOMIZATION = "kustomization.yaml"

# The kubelet's expansion: "$$" is a literal "$", "$(NAME)" a variable defined before; a
# reference to an undefined variable stays as written.
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

Object = dict[str, Any]


@dataclass(frozen=True)
class Manifests:
    """Every object the kustomization applies, with the file each came from."""

    kustomization: Object
    objects: list[tuple[str, Object]]

    @classmethod
    def load(cls, directory: Path = MANIFEST_DIR) -> Manifests:
        kustomization = yaml.safe_load((directory / KUSTOMIZATION).read_text())
        objects: list[tuple[str, Object]] = []
        for resource in kustomization["resources"]:
            with (directory / resource).open() as handle:
                objects.extend((resource, doc) for doc in yaml.safe_load_all(handle) if doc)
        return cls(kustomization, objects)

    @property
    def namespace(self) -> str:
        namespace: str = self.kustomization["namespace"]
        return namespace

    def all_of(self, kind: str) -> list[Object]:
        return [obj for _, obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> Object:
        """The object of ``kind`` (named ``name``, if given); fails unless exactly one."""
        found = [
            obj for obj in self.all_of(kind) if name is None or obj["metadata"]["name"] == name
        ]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
        return found[0]


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
    manifests: Manifests, container: Object, pod_name: str, namespace: str
) -> dict[str, str]:
    """The environment of ``container`` in the pod ``pod_name`` of ``namespace``."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert set(source) == {"configMapRef"}, f"envFrom {source} is not modelled here"
        config_map = manifests.one("ConfigMap", source["configMapRef"]["name"])
        env.update(config_map["data"])
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = _expand(variable["value"], env)
            continue
        assert set(variable["valueFrom"]) == {"fieldRef"}, f"env {variable} is not modelled here"
        field_path = variable["valueFrom"]["fieldRef"]["fieldPath"]
        assert field_path in fields, f"fieldRef {field_path} is not modelled here"
        env[variable["name"]] = fields[field_path]
    return env
