"""The repository stands alone: no tracked file (code, tests, docs, help texts, scripts) names
a path outside it. A user clones only this repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# An absolute path into the workplace, a relative path that climbs out of the checkout, or a
# name the reference specs had outside it (the copies here are in docs/, lower case).
_OUTSIDE = re.compile(
    r"/work/|\.\./shared|(?<![\w.-])shared/spec|PEERS\.md|STORE_FORMAT\.md|REPLICATION\.md"
)


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
    ).stdout.decode()
    paths = [REPO_ROOT / name for name in listed.split("\0") if name]
    return [p for p in paths if p.is_file() and not p.is_symlink() and p.suffix != ".png"]


def test_no_tracked_file_names_a_path_outside_the_repository() -> None:
    offenders = []
    for path in tracked_text_files():
        text = path.read_text(errors="replace")
        offenders += [
            f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
            for number, line in enumerate(text.splitlines(), 1)
            if _OUTSIDE.search(line) and path.name != Path(__file__).name
        ]
    assert offenders == []
