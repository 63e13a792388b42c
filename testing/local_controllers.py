"""LocalControllers: the three controller members of a local master-slave group, as real
processes on 127.0.0.1 (``raftlog controller start``), for ``raftlog cluster up
--replication master-slave`` and the chaos runs.

Rules this module keeps:
- The group's password is random, written to ``<base_dir>/controller.password`` (mode 0600)
  and handed over as a file, never on a command line.
- Only processes this module started are signalled, by PID, and only while their command line
  still names this member and its data directory (a recycled PID is never killed).
- Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from raftlog.testing.node_probes import HOST, alive, cmdline, free_port

PASSWORD_FILE = "controller.password"
LOG_FILE = "controller.log"


@dataclass
class LocalController:
    member_id: str
    grpc_port: int
    raft_port: int
    data_dir: str
    pid: int | None = None

    @property
    def grpc_address(self) -> str:
        return f"{HOST}:{self.grpc_port}"

    @property
    def raft_address(self) -> str:
        return f"{HOST}:{self.raft_port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "grpc_port": self.grpc_port,
            "raft_port": self.raft_port,
            "data_dir": self.data_dir,
            "pid": self.pid,
        }

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> LocalController:
        return cls(
            str(item["member_id"]),
            int(item["grpc_port"]),
            int(item["raft_port"]),
            str(item["data_dir"]),
            None if item.get("pid") is None else int(item["pid"]),
        )


class LocalControllers:
    def __init__(self, base_dir: str, members: list[LocalController] | None = None) -> None:
        self.base_dir = base_dir
        self.members = members or [
            LocalController(
                f"c{i}", free_port(), free_port(), os.path.join(base_dir, f"controller-c{i}")
            )
            for i in (1, 2, 3)
        ]
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def addresses(self) -> str:
        """The members' gRPC addresses, what brokers get as ``--controller-addresses``."""
        return ",".join(member.grpc_address for member in self.members)

    @property
    def password_path(self) -> str:
        return os.path.join(self.base_dir, PASSWORD_FILE)

    def command(self, member: LocalController) -> list[str]:
        peers = ",".join(f"{m.member_id}={m.raft_address}/{m.grpc_address}" for m in self.members)
        return [
            sys.executable,
            "-m",
            "raftlog.cli",
            "controller",
            "start",
            "--id",
            member.member_id,
            "--peers",
            peers,
            "--data-dir",
            member.data_dir,
            "--password-file",
            self.password_path,
        ]

    def _ours(self, member: LocalController) -> bool:
        if member.pid is None or not alive(member.pid):
            return False
        command = cmdline(member.pid)
        return f"--id {member.member_id}" in command and member.data_dir in command

    def start(self) -> None:
        os.makedirs(self.base_dir, exist_ok=True)
        if not os.path.exists(self.password_path):
            descriptor = os.open(self.password_path, os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(secrets.token_hex(24))
        for member in self.members:
            if self._ours(member):
                continue
            os.makedirs(member.data_dir, exist_ok=True)
            with open(os.path.join(member.data_dir, LOG_FILE), "ab") as log:
                process = subprocess.Popen(
                    self.command(member),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._processes[member.member_id] = process
            member.pid = process.pid

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM every member this module started, then SIGKILL what is left."""
        running = [m for m in self.members if self._ours(m)]
        for member in running:
            assert member.pid is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for member in running:
            while self._ours(member) and time.monotonic() < deadline:
                process = self._processes.get(member.member_id)
                if process is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=0.05)
                else:
                    time.sleep(0.05)
            if self._ours(member):
                assert member.pid is not None
                with contextlib.suppress(ProcessLookupError):
                    os.kill(member.pid, signal.SIGKILL)
        for member in self.members:
            process = self._processes.pop(member.member_id, None)
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5)
            member.pid = None
