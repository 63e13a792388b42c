"""MembershipChanges: the Raft mode's ``Membership`` (node/membership.py) -- what `raftlog member
add|remove|promote|list` does on a node: check the request, propose one CONF_CHANGE entry
through the Raft core (which carries the member's address in ``ConfChange.context``), and wait
until the leader applied it.

Rules this module keeps:
- Checks run on the Raft loop against the applied membership, right before the proposal, so
  nothing changes between the check and the proposal; a refused change proposed nothing.
- One change at a time (the core refuses a second while one is unapplied): refused with
  MembershipRefusedError, like every other "not in this state" answer.
- A learner is promoted only once it holds every entry the leader has committed, so the new
  voter never stalls commits while it catches up.
- A voter is removed only if the remaining voters still have a live quorum (members heard from
  within an election timeout, the leader included); the leader is removed only after it
  handed leadership to another live voter (the caller then asks the new leader).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from raftlog.node.config import ConfigError, check_id, parse_address
from raftlog.node.errors import (
    InvalidRequestError,
    MembershipRefusedError,
    NotLeaderError,
    UnknownMemberError,
    UnknownOutcomeError,
)
from raftlog.node.membership import MemberEntry, MembershipView
from raftlog.node.replication.address_book import AddressBook
from raftlog.node.replication.raft_entry import MAX_CONF_CHANGE_BYTES
from raftlog.node.replication.replica import Replica
from raftlog.raft.types import ConfChange, ConfChangeType, ProposalDroppedError, Role

_LOOP_TIMEOUT_S = 5.0


class MembershipChanges:
    def __init__(self, replica: Replica, book: AddressBook) -> None:
        self._replica = replica
        self._book = book

    def members(self) -> MembershipView:
        replica = self._replica
        result = replica.run_on_loop(
            lambda: (replica.node.conf_state, replica.node.leader), _LOOP_TIMEOUT_S
        )
        assert isinstance(result, tuple)
        conf, leader_id = result
        addresses = self._book.addresses
        return MembershipView(
            cluster_id=self._book.cluster_id,
            members=[
                *(MemberEntry(v, addresses.get(v, ""), True) for v in conf.voters),
                *(MemberEntry(lr, addresses.get(lr, ""), False) for lr in conf.learners),
            ],
            leader_id=leader_id,
            leader_address=addresses.get(leader_id) if leader_id else None,
        )

    # ------------------------------------------------------------------ the changes

    def add_learner(
        self, node_id: str, address: str, cluster_id: str, *, timeout_s: float
    ) -> MembershipView:
        _check_node_id(node_id)
        try:
            parse_address(address, "address")
        except ConfigError as error:
            raise InvalidRequestError(str(error)) from None
        if len(ConfChange(ConfChangeType.ADD_LEARNER, node_id, address.encode()).encode()) > (
            MAX_CONF_CHANGE_BYTES
        ):
            raise InvalidRequestError(
                f"address {address!r} is too long for a membership entry "
                f"({MAX_CONF_CHANGE_BYTES} bytes with the node id)"
            )
        if cluster_id and cluster_id != self._book.cluster_id:
            raise MembershipRefusedError(
                f"cluster id mismatch: this cluster is {self._book.cluster_id!r}, the node "
                f"{node_id} belongs to {cluster_id!r}; it may not join"
            )

        def change() -> ConfChange:
            owner = next((k for k, v in self._book.addresses.items() if v == address), None)
            if self._is_member(node_id):
                raise MembershipRefusedError(
                    f"{node_id} is already a member ({self._role_of(node_id)} at "
                    f"{self._book.addresses.get(node_id, '?')}); nothing changed"
                )
            if owner is not None:
                raise MembershipRefusedError(f"address {address} is already {owner}'s")
            return ConfChange(ConfChangeType.ADD_LEARNER, node_id, address.encode())

        return self._propose(change, timeout_s)

    def promote(self, node_id: str, *, timeout_s: float) -> MembershipView:
        _check_node_id(node_id)

        def change() -> ConfChange:
            self._require_member(node_id)
            node = self._replica.node
            if node_id in node.conf_state.voters:
                raise MembershipRefusedError(f"{node_id} is already a voter; nothing changed")
            status = node.status()
            progress = status.progress.get(node_id)
            match_index = progress.match_index if progress else 0
            if match_index < status.commit_index:
                raise MembershipRefusedError(
                    f"{node_id} is not caught up: it holds entries up to {match_index}, the "
                    f"leader has committed {status.commit_index} "
                    f"({status.commit_index - match_index} entries behind); retry once it "
                    "has caught up"
                )
            address = self._book.addresses.get(node_id, "")
            return ConfChange(ConfChangeType.ADD_VOTER, node_id, address.encode())

        return self._propose(change, timeout_s)

    def remove(self, node_id: str, *, timeout_s: float) -> MembershipView:
        _check_node_id(node_id)
        own_id = self._book.own_id
        deadline = time.monotonic() + timeout_s

        def change() -> ConfChange:
            self._require_member(node_id)
            self._check_quorum_after_removing(node_id)
            if node_id == own_id:
                raise _HandOverFirst(self._transfer_target())
            return ConfChange(ConfChangeType.REMOVE_NODE, node_id)

        try:
            return self._propose(change, timeout_s)
        except _HandOverFirst as hand_over:
            self._replica.transfer_leadership(
                hand_over.target, max(0.1, deadline - time.monotonic())
            )
            # The new leader removes this node when the caller asks it (the client follows).
            raise NotLeaderError(
                hand_over.target, self._book.addresses.get(hand_over.target), self._term()
            ) from None

    # ------------------------------------------------------------------ checks (on the loop)

    def _is_member(self, node_id: str) -> bool:
        conf = self._replica.node.conf_state
        return node_id in conf.voters or node_id in conf.learners

    def _role_of(self, node_id: str) -> str:
        return "voter" if node_id in self._replica.node.conf_state.voters else "learner"

    def _require_member(self, node_id: str) -> None:
        if not self._is_member(node_id):
            conf = self._replica.node.conf_state
            members = ", ".join(sorted(conf.voters + conf.learners))
            raise UnknownMemberError(f"{node_id} is not a member (members: {members})")

    def _live_voters(self) -> set[str]:
        view = self._replica.view
        return {m.node_id for m in view.members if m.voter and m.recent_active}

    def _check_quorum_after_removing(self, node_id: str) -> None:
        voters = self._replica.node.conf_state.voters
        if node_id not in voters:
            return  # a learner never counts toward a quorum
        remaining = [v for v in voters if v != node_id]
        if not remaining:
            raise MembershipRefusedError(f"{node_id} is the last voter; it cannot be removed")
        live = sorted(self._live_voters().intersection(remaining))
        needed = len(remaining) // 2 + 1
        if len(live) < needed:
            raise MembershipRefusedError(
                f"removing {node_id} would lose the quorum: of the {len(remaining)} voters "
                f"left ({', '.join(remaining)}) only {len(live)} are live "
                f"({', '.join(live) or 'none'}) and a quorum needs {needed}"
            )

    def _transfer_target(self) -> str:
        own_id = self._book.own_id
        view = self._replica.view
        live = [m for m in view.members if m.voter and m.recent_active and m.node_id != own_id]
        if not live:
            raise MembershipRefusedError(
                f"{own_id} leads and no other live voter can take over; it cannot be removed"
            )
        return max(live, key=lambda m: (m.match_index, m.node_id)).node_id

    def _term(self) -> int:
        return self._replica.view.term

    # ------------------------------------------------------------------ propose and wait

    def _propose(self, change: Callable[[], ConfChange], timeout_s: float) -> MembershipView:
        replica = self._replica

        def propose() -> tuple[int, int]:
            node = replica.node
            if node.role is not Role.LEADER:
                raise replica.not_leader_error()
            conf_change = change()
            try:
                index = node.propose_conf_change(conf_change)
            except ProposalDroppedError as error:
                raise MembershipRefusedError(f"{error}; retry shortly") from None
            return index, node.term

        result = replica.run_on_loop(propose, _LOOP_TIMEOUT_S)
        assert isinstance(result, tuple)
        index, term = result
        deadline = time.monotonic() + timeout_s
        with replica.visible:
            while replica.ready.applied_index < index:
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0 or replica.stopping.is_set() or replica.view.term != term:
                    raise UnknownOutcomeError(
                        f"the membership change (log index {index}) was proposed but not "
                        "applied in time; it may still be: check `raftlog member list`"
                    )
                replica.visible.wait(min(remaining_s, 0.1))
        return self.members()


class _HandOverFirst(Exception):
    """Raised on the loop: the leader itself is to be removed; hand leadership to ``target``."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


def _check_node_id(node_id: str) -> None:
    try:
        check_id("node_id", node_id)
    except ConfigError as error:
        raise InvalidRequestError(str(error)) from None
