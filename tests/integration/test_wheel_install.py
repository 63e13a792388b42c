"""raftlog installs into a user's own project: the wheel `make dist` builds, installed with the
``testing`` extra into a fresh venv outside the checkout, imports the client, the container
fixture and every package of the source tree, and its ``raftlog`` command runs."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
_TIMEOUT_S = 300


def _source_packages() -> set[str]:
    """Every ``raftlog.*`` package of the checkout (folders with an ``__init__.py``)."""
    packages = set()
    # raftlog/<pkg> are symlinks to the top-level folders: follow them.
    for directory, _, files in os.walk(REPO_ROOT / "raftlog", followlinks=True):
        if "__init__.py" in files:
            packages.add(".".join(Path(directory).relative_to(REPO_ROOT).parts))
    return packages


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_wheel_installs_with_the_testing_extra_into_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), "."], REPO_ROOT)
    (wheel,) = dist.glob("raftlog-*.whl")
    env_dir = tmp_path / "user-venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", f"{wheel}[testing]"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    if install.returncode != 0 and "Could not find a version" in install.stderr:
        pytest.skip(f"the package index cannot be reached: {install.stderr[-300:]}")
    assert install.returncode == 0, install.stderr
    project = tmp_path / "project"  # the user's own project: no raftlog source near it
    project.mkdir()
    _run(
        [
            python,
            "-c",
            "import raftlog, raftlog.client, raftlog.testing.pytest_plugin; "
            "from raftlog.client import Admin, Consumer, Producer; "
            "from raftlog.testing import RaftlogCluster; "
            "from raftlog.testing.local_cluster import LocalCluster; "
            "assert 'site-packages' in raftlog.__file__, raftlog.__file__",
        ],
        project,
    )
    # Read from the wheel itself: walking the installed packages would import them, and a
    # package of an extra that is not installed (raftlog.pipeline needs pyspark) would hide
    # its subpackages.
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {".".join(Path(name).parent.parts) for name in names if name.endswith("/__init__.py")}
    assert shipped == _source_packages()
    assert "raftlog/py.typed" in names
    assert "usage: raftlog" in _run([str(env_dir / "bin" / "raftlog"), "--help"], project)
