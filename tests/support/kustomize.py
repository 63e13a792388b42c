"""A kustomize build of deploy/kubernetes for the tests, with or without kubectl.

``build(directory)`` renders a kustomization the way ``kubectl kustomize`` does, for exactly
the features deploy/kubernetes uses: ``resources`` (files, and directories holding a
kustomization), ``components`` (directories holding a ``kind: Component`` kustomization,
applied after the resources and before the kustomization's own patches, images and
namespace, as kustomize does), ``namespace``, ``images`` (``name`` with ``newName``/``newTag``)
and ``patches`` given inline as JSON 6902 operations (``add``, ``replace``, ``remove``) on a
target named by kind and name. kubectl is not on every machine the tests run on (Debian's
kubernetes-client is 1.20, whose kustomize predates ``patches``), so the tests render with
this; tests/unit/deploy compares its output with ``kubectl kustomize`` wherever kubectl is
installed, so the two cannot drift apart unnoticed.

Rules it keeps: any other kustomization field, patch form or operation fails with a message
naming it, so a manifest change this renderer cannot model is never silently dropped.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # no types-PyYAML in the dev extra

Object = dict[str, Any]

KUSTOMIZATION = "kustomization.yaml"
_FIELDS = {"apiVersion", "kind", "namespace", "resources", "components", "images", "patches"}
# A component adds resources and transforms what it is applied to; no namespace of its own.
_COMPONENT_FIELDS = _FIELDS - {"namespace"}
_KINDS = {
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
    "Component": "kustomize.config.k8s.io/v1alpha1",
}


class UnsupportedKustomization(ValueError):
    """The kustomization uses something this renderer does not model."""


def build(directory: Path) -> list[Object]:
    """Every object the kustomization in ``directory`` renders, in resource order."""
    return _build(directory, [], "Kustomization")


def _load(directory: Path, kind: str) -> Object:
    kustomization: Object = yaml.safe_load((directory / KUSTOMIZATION).read_text())
    found = (kustomization.get("apiVersion"), kustomization.get("kind", "Kustomization"))
    if found[1] != kind or found[0] not in (None, _KINDS[kind]):
        raise UnsupportedKustomization(f"{directory}: expected a {kind}, found {found}")
    unknown = set(kustomization) - (_FIELDS if kind == "Kustomization" else _COMPONENT_FIELDS)
    if unknown:
        raise UnsupportedKustomization(f"{directory}: fields {sorted(unknown)} not modelled")
    return kustomization


def _build(directory: Path, objects: list[Object], kind: str) -> list[Object]:
    """``objects`` (what a component is applied to; none for a kustomization) with the
    kustomization in ``directory`` applied: its resources added, its components, patches,
    images and namespace applied, in kustomize's order."""
    kustomization = _load(directory, kind)
    for resource in kustomization.get("resources", []):
        path = directory / resource
        if path.is_dir():
            objects.extend(build(path))
        else:
            with path.open() as handle:
                objects.extend(doc for doc in yaml.safe_load_all(handle) if doc)
    for component in kustomization.get("components", []):
        objects = _build(directory / component, objects, "Component")
    for patch in kustomization.get("patches", []):
        _apply_patch(objects, patch, directory)
    for image in kustomization.get("images", []):
        for obj in objects:
            _set_image(obj, image)
    if "namespace" in kustomization:
        for obj in objects:
            obj["metadata"]["namespace"] = kustomization["namespace"]
    return objects


def _apply_patch(objects: list[Object], patch: Object, directory: Path) -> None:
    if set(patch) != {"target", "patch"} or set(patch["target"]) - {"kind", "name"}:
        raise UnsupportedKustomization(f"{directory}: only inline patches on kind/name: {patch}")
    operations = yaml.safe_load(patch["patch"])
    if not isinstance(operations, list):
        raise UnsupportedKustomization(f"{directory}: only JSON 6902 patches: {patch['patch']}")
    target = patch["target"]
    matched = [
        obj
        for obj in objects
        if all(
            (obj["kind"] if key == "kind" else obj["metadata"]["name"]) == value
            for key, value in target.items()
        )
    ]
    if not matched:
        raise UnsupportedKustomization(f"{directory}: patch target {target} matches nothing")
    for obj in matched:
        for operation in operations:
            _apply_operation(obj, operation)


def _apply_operation(obj: Object, operation: Object) -> None:
    op, path = operation["op"], operation["path"]
    if op not in ("add", "replace", "remove"):
        raise UnsupportedKustomization(f"JSON patch op {op!r} not modelled")
    # RFC 6901: "~1" is "/", "~0" is "~".
    keys = [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]
    parent: Any = obj
    for key in keys[:-1]:
        parent = parent[int(key)] if isinstance(parent, list) else parent[key]
    last = keys[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if op == "add":
            parent.insert(index, copy.deepcopy(operation["value"]))
            return
        parent.pop(index)
        if op == "replace":
            parent.insert(index, copy.deepcopy(operation["value"]))
        return
    if op != "add" and last not in parent:
        raise UnsupportedKustomization(f"JSON patch {op} of {path}: no such field")
    if op == "remove":
        del parent[last]
    else:
        parent[last] = copy.deepcopy(operation["value"])


def _set_image(obj: Object, image: Object) -> None:
    unknown = set(image) - {"name", "newName", "newTag"}
    if unknown:
        raise UnsupportedKustomization(f"images fields {sorted(unknown)} not modelled")
    pod_spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    for container in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
        name, _, tag = container["image"].partition(":")
        if name != image["name"]:
            continue
        new_name = image.get("newName", name)
        new_tag = image.get("newTag", tag)
        container["image"] = f"{new_name}:{new_tag}" if new_tag else new_name
