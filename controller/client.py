"""ControllerClient: what a master-slave broker (and `raftlog controller status`) calls.

Rules this module keeps: every call is bounded (``timeout_s`` per attempt, one attempt per
member plus one redirect); a non-leading member's hint is followed first, but only when it
names one of the configured addresses (a broker talks to the controller only where it was told
to: a hint naming another address, a proxy's upstream or a hostile one, is not dialled, the
next configured member is tried instead); the answers are plain dataclasses, never protobuf;
``ControllerUnavailable`` when no member could answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from raftlog.proto import controller_pb2, controller_pb2_grpc

LEADER_METADATA_KEY = "raftlog-controller-leader"


class ControllerUnavailable(Exception):
    """No controller member answered (or none leads right now)."""


class ControllerRefused(Exception):
    """The controller refused the request (a stale epoch, a bad argument); the message says."""


@dataclass(frozen=True, slots=True)
class GroupState:
    broker_name: str
    master_id: str | None
    master_address: str | None
    master_epoch: int
    in_sync: tuple[str, ...]
    members: dict[str, str]
    alive: tuple[str, ...]

    @classmethod
    def from_proto(cls, view: Any) -> GroupState:
        return cls(
            broker_name=view.broker_name,
            master_id=view.master_id or None,
            master_address=view.master_address or None,
            master_epoch=view.master_epoch,
            in_sync=tuple(view.in_sync),
            members=dict(view.members),
            alive=tuple(view.alive),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    group: GroupState
    lease_ms: int  # > 0 only for the master


class ControllerClient:
    def __init__(self, addresses: Sequence[str], timeout_s: float = 1.0) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self._addresses = list(addresses)
        self._timeout_s = timeout_s
        self._channels: dict[str, grpc.Channel] = {}
        self._preferred = self._addresses[0]

    def _stub(self, address: str) -> controller_pb2_grpc.ControllerStub:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = grpc.insecure_channel(address)
        return controller_pb2_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]

    def _call(self, method: Callable[[controller_pb2_grpc.ControllerStub], Any]) -> Any:
        order = [self._preferred] + [a for a in self._addresses if a != self._preferred]
        last = "no attempt"
        for address in order:
            try:
                answer = method(self._stub(address))
                self._preferred = address
                return answer
            except grpc.RpcError as error:
                code = error.code() if hasattr(error, "code") else None
                if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
                    raise ControllerRefused(error.details()) from None
                last = f"{address}: {_details(error)}"
                hint = dict(error.trailing_metadata() or ()).get(LEADER_METADATA_KEY)
                if hint and hint != address and hint in self._addresses:
                    try:
                        answer = method(self._stub(hint))
                        self._preferred = hint
                        return answer
                    except grpc.RpcError as hinted:
                        last = (
                            f"{hint}: {hinted.details() if hasattr(hinted, 'details') else hinted}"
                        )
        raise ControllerUnavailable(f"no controller member answered ({last})")

    def heartbeat(
        self, broker_name: str, node_id: str, address: str, max_offset: int, epoch: int
    ) -> HeartbeatReply:
        request = controller_pb2.HeartbeatRequest(
            broker_name=broker_name,
            node_id=node_id,
            address=address,
            max_offset=max_offset,
            epoch=epoch,
        )
        answer = self._call(lambda stub: stub.Heartbeat(request, timeout=self._timeout_s))
        return HeartbeatReply(GroupState.from_proto(answer.group), answer.lease_ms)

    def alter_in_sync(
        self, broker_name: str, master_id: str, epoch: int, in_sync: Sequence[str]
    ) -> GroupState:
        request = controller_pb2.AlterInSyncRequest(
            broker_name=broker_name, master_id=master_id, master_epoch=epoch, in_sync=in_sync
        )
        answer = self._call(lambda stub: stub.AlterInSync(request, timeout=self._timeout_s))
        return GroupState.from_proto(answer)

    def get_group(self, broker_name: str) -> GroupState:
        request = controller_pb2.GetGroupRequest(broker_name=broker_name)
        answer = self._call(lambda stub: stub.GetGroup(request, timeout=self._timeout_s))
        return GroupState.from_proto(answer)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()


def _details(error: grpc.RpcError) -> str:
    return str(error.details()) if hasattr(error, "details") else str(error)
