"""Errors a node raises to its gRPC services, one per answer a client must tell apart.

Rules this module keeps: each error maps to exactly one gRPC status code
(node/services/status_codes.py does the mapping); the message says what happened and what to
do. Store validation errors (raftlog.store.errors) travel unchanged beside these.
"""

from __future__ import annotations


class NodeError(Exception):
    """Base of the node's operating errors."""


class NotLeaderError(NodeError):
    """This member may not serve the request; the leader may. ``leader_id`` and
    ``leader_address`` are None when no leader is known (an election is running)."""

    def __init__(self, leader_id: str | None, leader_address: str | None, term: int) -> None:
        if leader_id is None:
            text = "no leader is known right now (an election is in progress); retry shortly"
        else:
            text = f"not leader; leader is {leader_id} at {leader_address}"
        super().__init__(text)
        self.leader_id = leader_id
        self.leader_address = leader_address
        self.term = term


class UnknownOutcomeError(NodeError):
    """The write was proposed but its outcome could not be learned in time (deadline, or
    leadership lost after proposing): it may still commit. Never report it as failed."""


class ShuttingDownError(NodeError):
    """The node is stopping (or not yet serving); retry at another member."""


class OverloadedError(NodeError):
    """Too many requests or bytes in flight on this node; back off and retry."""


class SequenceForgottenError(NodeError):
    """Idempotent produce: the batch's sequence is at or below the producer's last stored one
    and its result is no longer kept. The batch was stored exactly once; its offsets are lost."""


class SequenceGapError(NodeError):
    """Idempotent produce: the sequence skips a number; an earlier batch was never stored.
    Nothing was written."""


class TransferFailedError(NodeError):
    """A leadership transfer did not finish in time (it may still)."""


class InvalidRequestError(NodeError):
    """The request is malformed in a way the store does not check (an empty batch, an unknown
    member id); retrying it unchanged cannot succeed. Nothing was written."""


class MembershipRefusedError(NodeError):
    """A membership change the cluster's present state does not allow (another change is
    still pending, the learner is not caught up, a quorum would be lost, already a member, a
    different cluster id). Nothing was changed; the message says what would make it possible."""


class UnknownMemberError(NodeError):
    """The node id names no member of the cluster. Nothing was changed."""
