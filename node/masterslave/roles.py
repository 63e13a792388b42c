"""RoleHolder: which role a master-slave member plays right now, and whether it may write.

A member is the group's master or one of its slaves, in a master epoch. In static mode the
role is fixed by the configuration; under a controller it changes (a slave is promoted, a
deposed master follows the new one) and a master may write only while it holds a lease.

Rules this module keeps:
- Fencing: a master whose lease has lapsed refuses writes (NotLeaderError with no master
  known: the client retries and finds the new master), so a master cut off from its
  controller stops writing before the controller may elect another (the controller waits a
  full lease after the last heartbeat it granted; the member measures its lease from when it
  *sent* that heartbeat).
- A role change is one atomic swap; readers never see a master without its MasterState.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from raftlog.node.errors import NotLeaderError
from raftlog.node.masterslave.master_state import MasterState


@dataclass(frozen=True, slots=True)
class GroupRole:
    """One member's role: ``master_state`` is set exactly when this member is the master."""

    master_id: str | None
    epoch: int
    master_state: MasterState | None = None


class RoleHolder:
    def __init__(self, role: GroupRole, members: dict[str, str], *, leased: bool) -> None:
        """``leased``: writes need a live lease (controller mode); static mode never fences."""
        self._role = role
        self._members = members
        self._leased = leased
        self._lease_until_s = 0.0
        self._lock = threading.Lock()

    def current(self) -> GroupRole:
        with self._lock:
            return self._role

    def swap(self, role: GroupRole) -> GroupRole:
        """Make ``role`` current; returns the one it replaced."""
        with self._lock:
            previous, self._role = self._role, role
            return previous

    def extend_lease(self, until_monotonic_s: float) -> None:
        with self._lock:
            self._lease_until_s = max(self._lease_until_s, until_monotonic_s)

    def lease_valid(self) -> bool:
        with self._lock:
            return not self._leased or time.monotonic() < self._lease_until_s

    def writable_master(self) -> MasterState:
        """This member's MasterState when it may write now; NotLeaderError otherwise."""
        role = self.current()
        if role.master_state is None:
            address = self._members.get(role.master_id) if role.master_id else None
            raise NotLeaderError(role.master_id, address, role.epoch)
        if not self.lease_valid():
            # Fenced: another master may be elected any moment; nobody is known to be it yet.
            raise NotLeaderError(None, None, role.epoch)
        return role.master_state

    def master_address(self) -> str | None:
        master_id = self.current().master_id
        return self._members.get(master_id) if master_id else None
