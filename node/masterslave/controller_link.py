"""ControllerLink: a master-slave broker under a controller: heartbeats, and the role changes
and lease the answers bring.

Every ``interval_s`` the broker heartbeats the controller (its CommitLog end and epoch). The
answer names the group's master and epoch: this broker becomes the master (``become_master``),
follows another (``follow``), or stays; a master's answer carries a lease, which the broker
counts from when it SENT the heartbeat, less ``margin_s``; a master also brings the
controller's in-sync set in line with what it sees (MasterState.proposed_in_sync).

Rules this module keeps:
- The controller decides roles; the link never promotes this broker on its own.
- No answer means no lease renewal: a master cut off from the controller fences itself when
  its lease runs out (roles.py), before the controller may elect another.
- Every call is bounded by the client's timeout; the loop ends within one interval of close.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from raftlog.controller.client import (
    ControllerClient,
    ControllerRefused,
    ControllerUnavailable,
    GroupState,
)
from raftlog.node.masterslave.master_state import MasterState
from raftlog.node.masterslave.roles import RoleHolder

_log = logging.getLogger("raftlog.node.controller_link")


class Roles(Protocol):
    """What the link drives: a MasterSlaveMember."""

    roles: RoleHolder

    def become_master(self, epoch: int) -> None: ...

    def follow(self, master_id: str, epoch: int, address: str | None = None) -> None: ...

    def log_end(self) -> int: ...


@dataclass(frozen=True, slots=True)
class LinkSettings:
    broker_name: str
    node_id: str
    address: str
    interval_s: float = 0.3
    margin_s: float = 0.3


class ControllerLink:
    def __init__(self, client: ControllerClient, member: Roles, settings: LinkSettings) -> None:
        self._client = client
        self._member = member
        self._settings = settings
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="controller-link", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except (ControllerUnavailable, ControllerRefused) as error:
                _log.debug("controller: %s", error)
            except Exception:  # a bug must not end the heartbeats silently
                _log.exception("controller link round failed")
            self._stop.wait(self._settings.interval_s)

    def tick(self) -> None:
        """One heartbeat and what its answer asks for."""
        settings, member = self._settings, self._member
        role = member.roles.current()
        sent_at_s = time.monotonic()
        reply = self._client.heartbeat(
            settings.broker_name, settings.node_id, settings.address, member.log_end(), role.epoch
        )
        group = reply.group
        if group.master_id is None:
            return
        if group.master_id != settings.node_id:
            if (
                role.master_id != group.master_id
                or role.epoch != group.master_epoch
                or (role.master_state is not None)
            ):
                member.follow(group.master_id, group.master_epoch, group.master_address)
            return
        if role.master_state is None or role.epoch != group.master_epoch:
            member.become_master(group.master_epoch)
        state = member.roles.current().master_state
        assert state is not None
        if reply.lease_ms > 0:
            lease_s = reply.lease_ms / 1000 - settings.margin_s
            member.roles.extend_lease(sent_at_s + lease_s)
        self._sync_in_sync(state, group)

    def _sync_in_sync(self, state: MasterState, group: GroupState) -> None:
        """Tell the controller who is in sync; count only what it agreed to."""
        node_id = self._settings.node_id
        agreed = frozenset(group.in_sync)
        proposed = state.proposed_in_sync(node_id)
        if proposed != agreed:
            # Wait for the newcomers before the controller may elect them, and for the
            # leavers until it has dropped them: never count a set it does not hold.
            state.set_agreed(node_id, agreed | proposed)
            agreed = frozenset(
                self._client.alter_in_sync(
                    group.broker_name, node_id, group.master_epoch, sorted(proposed)
                ).in_sync
            )
        state.set_agreed(node_id, agreed)
