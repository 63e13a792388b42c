"""The seam between the client services and the replication mode for transactional messages:
what Producer.EndTransaction and Producer.TransactionChecks call (docs/messaging.md
"Transactions"). The services never touch replication (pyproject.toml's contracts); like
``WritePath``, this protocol is what they see.

One implementation: the Raft member's TransactionCoordinator (node/replication/
transactions.py), which decides transactions on the leader and checks back the undecided
ones. A master-slave node has none (its services answer INVALID_ARGUMENT: transactions need
the Raft mode, as delay messages do).

Rules every implementation keeps:
- A transaction is decided at most once: a second request for it (a retry, a check-back's
  answer, the leader's own rollback after the last check) is answered with the recorded
  decision as a duplicate, and writes nothing.
- A commit's message and its op record are written in one replicated entry: never one
  without the other.
- Refuse before writing when this member may not decide (NotLeaderError); an outcome not
  learned in time is UnknownOutcomeError, never a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from raftlog.node.messaging.transaction_checkers import CheckerRegistry
from raftlog.store.message_store import PutResult


@dataclass(frozen=True, slots=True)
class EndTransaction:
    """A producer's decision of one transaction (EndTransactionRequest, checked for form)."""

    producer_group: str
    topic: str
    transaction_id: str
    msg_id: str
    commit: bool
    from_check: bool = False


@dataclass(frozen=True, slots=True)
class EndOutcome:
    """How the transaction ended: ``commit`` (else rolled back) -- this request's decision, or
    the one recorded before (``duplicate``); ``result``: where a commit that is not a
    duplicate stored the message, in ``queue_id`` of its topic; ``decision_known`` False: a
    duplicate whose decision is no longer retained (its op record was deleted)."""

    commit: bool
    duplicate: bool
    result: PutResult | None = None
    queue_id: int = 0
    decision_known: bool = True


class TransactionPath(Protocol):
    @property
    def checkers(self) -> CheckerRegistry:
        """The live check-back streams the coordinator sends checks to."""
        ...

    def end_transaction(self, request: EndTransaction, *, timeout_s: float) -> EndOutcome:
        """Decide ``request``'s transaction (see the module rules)."""
        ...
