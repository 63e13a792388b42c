"""ControllerService: the controller's gRPC service (controller.proto), the brokers' leases and
the election loop, on one controller member.

Only the leading pysyncobj member answers; it keeps each broker's last heartbeat in memory
(monotonic clock) and, every ``check_interval_s``, elects a master for any group whose master's
lease has run out (or that never had one) from its alive in-sync brokers.

Rules this module keeps (the fencing contract, controller.proto):
- A heartbeat from the master is answered with ``lease_ms`` only once a renewal command has
  been committed through pysyncobj (so by a member that still leads); the master may write
  until ``lease_ms`` after it sent that heartbeat, less its own margin.
- No replacement is elected before ``lease_ms`` has passed since the master's last heartbeat
  here, and a member that just became the leading one waits a full lease (plus one check)
  before electing anyone: it never saw the heartbeats its predecessor answered.
- A broker is alive while its last heartbeat is within ``lease_ms``.
- Bad input gets INVALID_ARGUMENT with a message; a non-leading member UNAVAILABLE with the
  leader's gRPC address when known.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import grpc

from raftlog.controller.member import ControllerMember
from raftlog.controller.state import Group, choose_master
from raftlog.proto import controller_pb2, controller_pb2_grpc

_log = logging.getLogger("raftlog.controller")
LEADER_METADATA_KEY = "raftlog-controller-leader"
_MAX_NAME_BYTES = 64
_MAX_ADDRESS_BYTES = 256


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    lease_ms: int  # ControllerConfig.lease_ms
    check_interval_s: float = 0.1


@dataclass(slots=True)
class _Beat:
    at_s: float
    max_offset: int


class ControllerService(controller_pb2_grpc.ControllerServicer):
    def __init__(
        self,
        member: ControllerMember,
        settings: LeaseSettings,
        grpc_address_of: dict[str, str],
    ) -> None:
        """``grpc_address_of``: every member's raft address -> its gRPC address (leader hints)."""
        self._member = member
        self._settings = settings
        self._grpc_address_of = grpc_address_of
        self._beats: dict[tuple[str, str], _Beat] = {}
        self._lock = threading.Lock()
        self._leading_since_s: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._elect_loop, name="elections", daemon=True)

    # -- gRPC ---------------------------------------------------------------------------------

    def Heartbeat(
        self, request: controller_pb2.HeartbeatRequest, context: grpc.ServicerContext
    ) -> controller_pb2.HeartbeatResponse:
        _check_name(request.broker_name, "broker_name", context)
        _check_name(request.node_id, "node_id", context)
        if not request.address or len(request.address.encode()) > _MAX_ADDRESS_BYTES:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "address must be 1..256 bytes")
        if request.max_offset < 0:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "max_offset must be >= 0")
        self._require_leading(context)
        group = self._member.group(request.broker_name)
        if group.members.get(request.node_id) != request.address:
            self._apply(
                self._member.register,
                context,
                request.broker_name,
                request.node_id,
                request.address,
            )
            group = self._member.group(request.broker_name)
        with self._lock:
            self._beats[(request.broker_name, request.node_id)] = _Beat(
                time.monotonic(), request.max_offset
            )
        lease_ms = 0
        if group.master_id == request.node_id and self._renewed(group.name, request.node_id):
            lease_ms = self._settings.lease_ms
        return controller_pb2.HeartbeatResponse(group=self._view(group), lease_ms=lease_ms)

    def _renewed(self, name: str, master_id: str) -> bool:
        """Commit the master's renewal: only a member still leading the controller group
        can, so a deposed leader (pysyncobj may briefly have two) grants no lease."""
        from pysyncobj import SyncObjException

        try:
            return self._member.renew(name, master_id).applied
        except SyncObjException:
            return False

    def AlterInSync(
        self, request: controller_pb2.AlterInSyncRequest, context: grpc.ServicerContext
    ) -> controller_pb2.GroupView:
        _check_name(request.broker_name, "broker_name", context)
        _check_name(request.master_id, "master_id", context)
        for node_id in request.in_sync:
            _check_name(node_id, "in_sync", context)
        self._require_leading(context)
        self._apply(
            self._member.alter_in_sync,
            context,
            request.broker_name,
            request.master_id,
            request.master_epoch,
            frozenset(request.in_sync),
        )
        return self._view(self._member.group(request.broker_name))

    def GetGroup(
        self, request: controller_pb2.GetGroupRequest, context: grpc.ServicerContext
    ) -> controller_pb2.GroupView:
        _check_name(request.broker_name, "broker_name", context)
        self._require_leading(context)
        return self._view(self._member.group(request.broker_name))

    def _require_leading(self, context: grpc.ServicerContext) -> None:
        if self._member.leading:
            return
        leader = self._grpc_address_of.get(self._member.leader_raft_address or "")
        if leader:
            context.set_trailing_metadata(((LEADER_METADATA_KEY, leader),))
        context.abort(
            grpc.StatusCode.UNAVAILABLE,
            f"not the controller leader; try {leader}" if leader else "no controller leader yet",
        )

    @staticmethod
    def _apply(command: object, context: grpc.ServicerContext, *args: object) -> None:
        from pysyncobj import SyncObjException

        try:
            verdict = command(*args)  # type: ignore[operator]
        except SyncObjException as error:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"the controller could not commit: {error}")
        if not verdict.applied:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, verdict.reason)

    def _view(self, group: Group) -> controller_pb2.GroupView:
        return controller_pb2.GroupView(
            broker_name=group.name,
            master_id=group.master_id or "",
            master_address=group.members.get(group.master_id or "", ""),
            master_epoch=group.epoch,
            in_sync=sorted(group.in_sync),
            members=group.members,
            alive=sorted(self._alive(group.name)),
        )

    # -- leases and elections -----------------------------------------------------------------

    def _alive(self, name: str) -> dict[str, int]:
        lease_s = self._settings.lease_ms / 1000
        now_s = time.monotonic()
        with self._lock:
            return {
                node_id: beat.max_offset
                for (group, node_id), beat in self._beats.items()
                if group == name and now_s - beat.at_s <= lease_s
            }

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _elect_loop(self) -> None:
        while not self._stop.wait(self._settings.check_interval_s):
            try:
                self._check_groups()
            except Exception:  # a failed round is retried next tick; never kill the loop
                _log.exception("election round failed")

    def _check_groups(self) -> None:
        member = self._member
        if not member.leading:
            self._leading_since_s = None
            return
        now_s = time.monotonic()
        if self._leading_since_s is None:
            self._leading_since_s = now_s
            with self._lock:
                self._beats.clear()  # only heartbeats this member answered count
        lease_s = self._settings.lease_ms / 1000
        if now_s - self._leading_since_s < lease_s + self._settings.check_interval_s:
            return
        for name in sorted(member.state.groups):
            group = member.group(name)
            alive = self._alive(name)
            if group.master_id is not None and group.master_id in alive:
                continue
            candidate = choose_master(group, alive)
            if candidate is None:
                continue
            verdict = member.elect(name, candidate, group.epoch)
            _log.info(
                "group %s: %s elected master of epoch %d (%s)",
                name,
                candidate,
                group.epoch + 1,
                "done" if verdict.applied else verdict.reason,
            )


def _check_name(value: str, what: str, context: grpc.ServicerContext) -> None:
    if not value or len(value.encode()) > _MAX_NAME_BYTES:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"{what} must be 1..{_MAX_NAME_BYTES} bytes"
        )
