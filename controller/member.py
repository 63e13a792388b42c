"""ControllerMember: one member of the controller's pysyncobj group, replicating
ControllerState (state.py) through pysyncobj's Raft log.

Rules this module keeps:
- pysyncobj unpickles what it receives, so a member never runs without a password (its
  traffic is then encrypted and authenticated) and binds only to its own configured address.
- Commands go through pysyncobj only on the leading member (``commandsWaitLeader`` off:
  a follower refuses at once rather than queueing), synchronously, with a timeout.
- The state survives a restart: pysyncobj's journal and full dump live in the member's data
  directory.
- Importing pysyncobj must not break the process: its import replaces ``socket.inet_ntop``
  with a Windows-only function on every platform, which this module undoes.
"""

from __future__ import annotations

import os
import socket

# pysyncobj's win_inet_pton module replaces socket.inet_ntop, on every platform, with a
# Windows-only version that raises elsewhere; keep the real one for the whole process (the
# store decodes record hosts with it).
_INET_NTOP = socket.inet_ntop
from pysyncobj import SyncObj, SyncObjConf, replicated  # noqa: E402

socket.inet_ntop = _INET_NTOP

from raftlog.controller.state import ControllerState, Group, Verdict  # noqa: E402

COMMAND_TIMEOUT_S = 2.0


class ControllerMember(SyncObj):  # type: ignore[misc]
    def __init__(
        self, raft_address: str, peer_raft_addresses: list[str], data_dir: str, password: str
    ) -> None:
        if not password:
            raise ValueError("a controller member needs a password (pysyncobj unpickles input)")
        os.makedirs(data_dir, exist_ok=True)
        conf = SyncObjConf(
            password=password,
            bindAddress=raft_address,
            journalFile=os.path.join(data_dir, "controller.journal"),
            fullDumpFile=os.path.join(data_dir, "controller.dump"),
            commandsWaitLeader=False,
            raftMinTimeout=0.4,
            raftMaxTimeout=0.8,
            appendEntriesPeriod=0.05,
            connectionTimeout=1.5,
            dynamicMembershipChange=False,
        )
        self.state = ControllerState()
        super().__init__(raft_address, peer_raft_addresses, conf)

    # -- replicated commands (applied on every member, in log order) ------------------------

    @replicated  # type: ignore[untyped-decorator]
    def _register(self, name: str, node_id: str, address: str) -> Verdict:
        return self.state.register(name, node_id, address)

    @replicated  # type: ignore[untyped-decorator]
    def _elect(self, name: str, candidate: str, expected_epoch: int) -> Verdict:
        return self.state.elect(name, candidate, expected_epoch)

    @replicated  # type: ignore[untyped-decorator]
    def _renew(self, name: str, master_id: str) -> Verdict:
        return self.state.renew(name, master_id)

    @replicated  # type: ignore[untyped-decorator]
    def _alter_in_sync(
        self, name: str, master_id: str, epoch: int, in_sync: frozenset[str]
    ) -> Verdict:
        return self.state.alter_in_sync(name, master_id, epoch, in_sync)

    # -- what the service calls (on the leading member) --------------------------------------

    def register(self, name: str, node_id: str, address: str) -> Verdict:
        result: Verdict = self._register(
            name, node_id, address, sync=True, timeout=COMMAND_TIMEOUT_S
        )
        return result

    def elect(self, name: str, candidate: str, expected_epoch: int) -> Verdict:
        result: Verdict = self._elect(
            name, candidate, expected_epoch, sync=True, timeout=COMMAND_TIMEOUT_S
        )
        return result

    def renew(self, name: str, master_id: str) -> Verdict:
        result: Verdict = self._renew(name, master_id, sync=True, timeout=COMMAND_TIMEOUT_S)
        return result

    def alter_in_sync(
        self, name: str, master_id: str, epoch: int, in_sync: frozenset[str]
    ) -> Verdict:
        result: Verdict = self._alter_in_sync(
            name, master_id, epoch, in_sync, sync=True, timeout=COMMAND_TIMEOUT_S
        )
        return result

    def group(self, name: str) -> Group:
        return self.state.group(name)

    @property
    def leading(self) -> bool:
        return bool(self._isLeader())

    @property
    def leader_raft_address(self) -> str | None:
        leader = self._getLeader()
        return None if leader is None else str(leader.address)

    @property
    def term(self) -> int:
        return int(self._getTerm())
