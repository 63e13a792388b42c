"""Joining a running cluster (``--join host:port,...``): what a node with a fresh data dir does
before its Raft log exists -- ask the cluster to add it as a learner and learn the membership
its log starts from -- and, once running as a learner, ask to be promoted to voter (the leader
agrees only once it caught up).

Why the membership is learned before the log is created: the founding members are in no log
entry (they come from ``--peers``), so a joiner replaying the log from index 1 on an empty
membership would count itself the only voter once promoted. It starts instead from the
membership the leader reports, with itself a learner; replaying older changes on top of it
ends in the same membership (each change sets one member's role).

Rules this module keeps:
- Talks to the cluster only through the Admin RPCs (it is a client of them, with raw stubs:
  node never imports raftlog.client), following "not leader" redirects; every loop is bounded
  in attempts and by ``join_timeout_ms``.
- Refuses to start (JoinError, a ConfigError: exit status 2) on a cluster id that differs from
  this node's, on an address mismatch, and when the cluster counts this node a voter although
  its data dir is fresh (its vote and log are gone: remove it first, then join again).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from raftlog.node.config import ConfigError, NodeConfig
from raftlog.node.write_path import ClusterView
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.raft.types import ConfState

_log = logging.getLogger(__name__)
_CALL_TIMEOUT_S = 10.0
_RETRY_INTERVAL_S = 1.0
_LEADER_TRAILER = "raftlog-leader"


class JoinError(ConfigError):
    """This node may not join the cluster it was pointed at; the message says why."""


@dataclass(frozen=True, slots=True)
class JoinedMembership:
    """The membership a joining node's log starts from, and every member's address."""

    conf_state: ConfState
    addresses: dict[str, str]


class _AdminCaller:
    """Calls Admin RPCs on the leader, found through ``addresses`` and redirects."""

    def __init__(self, addresses: tuple[str, ...]) -> None:
        self._addresses = addresses
        self.leader_address: str | None = None

    def call(self, method: str, request: Any) -> Any:
        """The leader's answer; the last RpcError when no member gave one."""
        pending = [a for a in (self.leader_address,) if a] + list(self._addresses)
        last_error: grpc.RpcError | None = None
        for _ in range(len(pending) + 2):  # each address once, plus two redirects
            if not pending:
                break
            address = pending.pop(0)
            with grpc.insecure_channel(address) as channel:
                stub = client_pb2_grpc.AdminStub(channel)  # type: ignore[no-untyped-call]
                try:
                    return getattr(stub, method)(request, timeout=_CALL_TIMEOUT_S)
                except grpc.RpcError as error:
                    last_error = error
                    leader = _redirect(error)
                    if leader and leader != address:
                        self.leader_address = leader
                        pending.insert(0, leader)
        assert last_error is not None, "join addresses are never empty here"
        raise last_error


def _redirect(error: grpc.RpcError) -> str | None:
    if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    trailers = dict(error.trailing_metadata() or ())
    leader = trailers.get(_LEADER_TRAILER)
    return str(leader) if leader else None


def _describe(error: grpc.RpcError) -> str:
    return f"{error.code().name}: {error.details()}"


def join_cluster(config: NodeConfig) -> JoinedMembership:
    """Ask the cluster to add this node as a learner; return the membership to start from."""
    caller = _AdminCaller(config.join_addresses)
    own = config.advertised
    deadline = time.monotonic() + config.join_timeout_ms / 1000
    last_answer = "no answer yet"
    attempts = 2 * int(config.join_timeout_ms / 1000 / _RETRY_INTERVAL_S) + 2
    for _ in range(attempts):
        if time.monotonic() >= deadline:
            break
        try:
            listing = caller.call("ListMembers", client_pb2.ListMembersRequest())
            caller.leader_address = listing.leader_address or caller.leader_address
            joined = _joined(config, listing)
            if joined is not None:
                _log.info("joined cluster %s as a learner", config.cluster_id)
                return joined
            request = client_pb2.AddMemberRequest(
                node_id=config.node_id, address=own, cluster_id=config.cluster_id
            )
            caller.call("AddMember", request)
            continue  # list again: the membership to start from includes this node now
        except grpc.RpcError as error:
            last_answer = _describe(error)
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise JoinError(f"join: the cluster refused this node: {last_answer}") from None
            _log.info("join: not yet (%s); retrying", last_answer)
        time.sleep(_RETRY_INTERVAL_S)
    raise JoinError(
        f"join: not added within {config.join_timeout_ms} ms (join_timeout_ms); "
        f"last answer: {last_answer}"
    )


def _joined(config: NodeConfig, listing: Any) -> JoinedMembership | None:
    """The membership to start from once it lists this node; None while it does not."""
    if listing.cluster_id != config.cluster_id:
        raise JoinError(
            f"join: cluster id mismatch: the cluster at {', '.join(config.join_addresses)} "
            f"is {listing.cluster_id!r}, this node's is {config.cluster_id!r}; it does not join"
        )
    members = {m.node_id: m for m in listing.members}
    own = members.get(config.node_id)
    if own is None:
        return None
    if own.address != config.advertised:
        raise JoinError(
            f"join: {config.node_id} is already a member at {own.address}, not at "
            f"{config.advertised}; `raftlog member remove {config.node_id}` first"
        )
    if own.voter:
        raise JoinError(
            f"join: {config.node_id} is a voter of cluster {config.cluster_id} but its data "
            f"dir is empty (its log and vote are lost): `raftlog member remove "
            f"{config.node_id}`, then start it again to join as a new learner"
        )
    return JoinedMembership(
        conf_state=ConfState(
            voters=tuple(sorted(m.node_id for m in listing.members if m.voter)),
            learners=tuple(sorted(m.node_id for m in listing.members if not m.voter)),
        ),
        addresses={m.node_id: m.address for m in listing.members},
    )


def start_promotion(
    config: NodeConfig, view: Callable[[], ClusterView], stopping: threading.Event
) -> threading.Thread:
    """While this node is a learner, ask the leader every second to promote it (it agrees
    once this node caught up); stops when it is a voter, stopping is set or the join
    timeout passes."""

    def run() -> None:
        caller = _AdminCaller(config.join_addresses)
        deadline = time.monotonic() + config.join_timeout_ms / 1000
        request = client_pb2.PromoteMemberRequest(node_id=config.node_id)
        while not stopping.wait(_RETRY_INTERVAL_S):
            here = view()
            own = next((m for m in here.members if m.node_id == config.node_id), None)
            if own is not None and own.voter:
                _log.info("promoted to voter")
                return
            if time.monotonic() > deadline:
                _log.error("not promoted within join_timeout_ms; `raftlog member promote` it")
                return
            if own is None:
                continue  # our own addition is not applied here yet
            caller.leader_address = here.leader_address or caller.leader_address
            try:
                caller.call("PromoteMember", request)
            except grpc.RpcError as error:
                _log.info("promotion: not yet (%s)", _describe(error))

    thread = threading.Thread(target=run, name="join-promotion", daemon=True)
    thread.start()
    return thread
