"""What becomes of a chaos run's data directory (``settle_data``): a temp directory the run
made goes after a valid run unless kept; an invalid run's, or one given with --data-dir,
stays; the line printed says which, where, and how big."""

from __future__ import annotations

from pathlib import Path

from raftlog.chaos.checker import check
from raftlog.chaos.runner import RunConfig, RunResult, settle_data


def _result(data_dir: Path, *, given: bool, problems: list[str] | None = None) -> RunResult:
    (data_dir / "cluster").mkdir(parents=True)
    (data_dir / "history.jsonl").write_bytes(b"x" * 1_500_000)
    (data_dir / "cluster" / "node.log").write_bytes(b"y" * 500_000)
    return RunResult(
        config=RunConfig(data_dir=data_dir if given else None),
        report=check([], []),
        schedule=[],
        data_dir=data_dir,
        history_path=data_dir / "history.jsonl",
        replicas_path=data_dir / "replicas.jsonl",
        problems=problems or [],
    )


def test_a_valid_runs_temp_directory_is_removed(tmp_path: Path) -> None:
    data_dir = tmp_path / "raftlog-chaos-1-x"
    line = settle_data(_result(data_dir, given=False))
    assert line == f"data: removed {data_dir} (2.0 MB; the run is valid; --keep-data keeps it)"
    assert not data_dir.exists()


def test_keep_data_keeps_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "raftlog-chaos-1-x"
    line = settle_data(_result(data_dir, given=False), keep=True)
    assert line == f"data: {data_dir} (2.0 MB, kept: --keep-data; remove it when done)"
    assert (data_dir / "history.jsonl").exists()


def test_an_invalid_runs_data_is_kept(tmp_path: Path) -> None:
    data_dir = tmp_path / "raftlog-chaos-1-x"
    result = _result(data_dir, given=False, problems=["replicas did not converge"])
    assert not result.valid
    assert settle_data(result).endswith("kept: the run is invalid; remove it when done)")
    assert (data_dir / "history.jsonl").exists()


def test_a_given_data_dir_is_always_kept(tmp_path: Path) -> None:
    data_dir = tmp_path / "soak" / "run-1"
    assert settle_data(_result(data_dir, given=True)) == (
        f"data: {data_dir} (2.0 MB, in --data-dir: kept)"
    )
    assert (data_dir / "cluster" / "node.log").exists()
