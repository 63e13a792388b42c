"""What a sweep removes, decided without Docker: a fake docker client holds labelled and
unlabelled objects of a dead run, a live run, another host's run and no run, and
``raftlog testing sweep`` must remove (and name) exactly the dead run's objects."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from raftlog.cli import main
from raftlog.testing import docker_objects
from raftlog.testing.docker_objects import (
    LABEL_OWNER,
    LABEL_RUN,
    OWNER_ELSEWHERE,
    OWNER_GONE,
    OWNER_RUNNING,
)

HOST = socket.gethostname()


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


@dataclass
class FakeObject:
    name: str
    labels: dict[str, str]
    in_container_config: bool = False

    @property
    def attrs(self) -> dict[str, Any]:
        if self.in_container_config:  # containers keep their labels under Config
            return {"Config": {"Labels": self.labels}}
        return {"Labels": self.labels}


@dataclass
class FakeCollection:
    objects: list[FakeObject] = field(default_factory=list)

    def list(self, all: bool = False, filters: dict[str, str] | None = None) -> list[FakeObject]:
        wanted = (filters or {}).get("label", "")
        key, _, value = wanted.partition("=")
        return [
            o for o in self.objects if key in o.labels and (not value or o.labels[key] == value)
        ]


class FakeClient:
    def __init__(self, runs: dict[str, str]) -> None:
        """``runs``: run id -> owner label; plus one object of no run in each collection."""
        self.containers = FakeCollection()
        self.networks = FakeCollection()
        self.volumes = FakeCollection()
        for run_id, owner in runs.items():
            labels = {LABEL_RUN: run_id, LABEL_OWNER: owner}
            short = run_id[:8]
            self.containers.objects.append(FakeObject(f"raftlog-test-{short}-n1", labels, True))
            self.networks.objects.append(FakeObject(f"raftlog-test-{short}", labels))
            self.volumes.objects.append(FakeObject(f"raftlog-test-{short}-n1", labels))
        for collection in (self.containers, self.networks, self.volumes):
            collection.objects.append(FakeObject("somebody-elses", {"other": "x"}))


@pytest.fixture
def fake_docker(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A dead run, a live run (this process), another host's run; returns the run ids
    ``remove_by_label`` was called with."""
    client = FakeClient(
        {
            "deadrun1-0000": f"{HOST}:{_dead_pid()}",
            "liverun1-0000": f"{HOST}:{os.getpid()}",
            "elsewhere-0000": "another-host:1",
        }
    )
    removed: list[str] = []
    monkeypatch.setattr(docker_objects, "docker_client", lambda: client)
    monkeypatch.setattr(docker_objects, "docker_available", lambda: None)
    monkeypatch.setattr(docker_objects, "remove_by_label", removed.append)
    return removed


def test_labelled_runs_group_objects_by_run_and_judge_their_owner(fake_docker: list[str]) -> None:
    runs = {run.run_id: run for run in docker_objects.labelled_runs()}
    assert sorted(runs) == ["deadrun1-0000", "elsewhere-0000", "liverun1-0000"]
    assert runs["deadrun1-0000"].owner_state == OWNER_GONE
    assert runs["liverun1-0000"].owner_state == OWNER_RUNNING
    assert runs["elsewhere-0000"].owner_state == OWNER_ELSEWHERE
    assert runs["deadrun1-0000"].objects == (
        "container raftlog-test-deadrun1-n1",
        "network raftlog-test-deadrun1",
        "volume raftlog-test-deadrun1-n1",
    )


def test_sweep_stale_removes_only_dead_runs_and_only_those_asked_for(
    fake_docker: list[str],
) -> None:
    assert [r.run_id for r in docker_objects.sweep_stale(["liverun1-0000"])] == []
    assert [r.run_id for r in docker_objects.sweep_stale()] == ["deadrun1-0000"]
    assert fake_docker == ["deadrun1-0000"]


def test_the_cli_names_what_it_removed_and_what_it_left(
    fake_docker: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["testing", "sweep"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert fake_docker == ["deadrun1-0000"]
    assert lines[0].startswith("removed run deadrun1-0000 (owner ")
    assert lines[0].endswith(
        "gone): container raftlog-test-deadrun1-n1, network raftlog-test-deadrun1, "
        "volume raftlog-test-deadrun1-n1"
    )
    assert f"left alone: run liverun1-0000 (owner {HOST}:" in lines[2]
    assert lines[1] == f"left alone: run elsewhere-0000 (owner another-host:1, {OWNER_ELSEWHERE})"
    assert len(lines) == 3


def test_dry_run_and_run_filter_remove_nothing_else(
    fake_docker: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["testing", "sweep", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("would remove run deadrun1-0000")
    assert main(["testing", "sweep", "--run", "liverun1-0000"]) == 0
    out = capsys.readouterr().out
    assert "left alone: run liverun1-0000" in out
    assert "nothing to remove" in out
    assert fake_docker == []


def test_without_docker_the_sweep_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(docker_objects, "docker_available", lambda: "no Docker engine answers (x)")
    assert main(["testing", "sweep"]) == 1
    assert capsys.readouterr().err == "raftlog: no Docker engine answers (x)\n"
