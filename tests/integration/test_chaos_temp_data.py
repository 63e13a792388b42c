"""A chaos run without --data-dir, through the CLI, against local node processes: it names its
new temp directory when it starts and, the run being valid, removes it at the end and says so
(with --keep-data it would stay; settle_data's unit tests cover the other cases)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from raftlog.cli import main


def test_a_valid_run_removes_its_temp_directory_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp makes it
    code = main(["chaos", "run", "--duration", "4s", "--faults", "pause", "--seed", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, "\n".join(lines)
    (named,) = [line for line in lines if line.endswith(" (a new temp directory)")]
    data_dir = Path(named.removeprefix("data: ").removesuffix(" (a new temp directory)"))
    assert data_dir.parent == tmp_path
    assert lines[-1].startswith(f"data: removed {data_dir} (")
    assert lines[-1].endswith(" MB; the run is valid; --keep-data keeps it)")
    assert not data_dir.exists()
