"""raft/ stays a pure state machine: every module imports only from an allow-list (no I/O,
clock, threads, sockets, asyncio or logging), and never calls the global ``random``."""

from __future__ import annotations

import ast
from pathlib import Path

RAFT_DIR = Path(__file__).resolve().parents[3] / "raft"
ALLOWED_MODULES = {
    "__future__",
    "bisect",
    "collections",
    "collections.abc",
    "dataclasses",
    "enum",
    "itertools",
    "random",  # for the type of the injected rng only; see below
    "typing",
}


def raft_modules() -> list[Path]:
    modules = sorted(RAFT_DIR.glob("*.py"))
    assert modules, RAFT_DIR
    return modules


def imported_modules(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "use absolute raftlog.raft imports"
            names.append(node.module or "")
    return names


def test_raft_modules_import_only_allowed_modules():
    for path in raft_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for name in imported_modules(tree):
            assert name in ALLOWED_MODULES or name.startswith("raftlog.raft."), (path.name, name)


def test_raft_modules_never_use_the_global_random():
    for path in raft_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            is_random_attribute = (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "random"
            )
            if is_random_attribute:
                # Only the annotation random.Random is allowed, never random.<function>.
                assert isinstance(node, ast.Attribute)
                assert node.attr == "Random", (path.name, f"random.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "random":
                raise AssertionError((path.name, "from random import ..."))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                value = node.func.value
                if isinstance(value, ast.Name) and value.id == "random":
                    raise AssertionError((path.name, "random.Random(...) built in the core"))
