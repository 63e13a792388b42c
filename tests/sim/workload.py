"""The simulated clients' proposals: what was proposed, where, and what was acknowledged.

Rules this module keeps:
- Every proposal carries a unique message body (``b"p<id>"``), so an applied entry names its
  proposal (``body_of``: the entry's payload is the stamped message record).
- A proposal is *acknowledged* when the node that accepted it applies it at the index and term
  ``propose`` returned: that is the moment a leader would answer the client "committed".
- A proposal is *pending* until some node applies it; the heal phase re-proposes pending ones
  (at-least-once, as a retrying client does), so a proposal may commit more than once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftlog.raft.types import Entry, EntryType, NodeId
from raftlog.store.record import decode_record


def body_of(entry: Entry | None) -> bytes | None:
    """The body of the one message a proposal's entry carries; None for any other entry."""
    if entry is None or entry.type is not EntryType.NORMAL or not entry.data:
        return None
    return decode_record(entry.data, 0).body


@dataclass(slots=True)
class Proposal:
    data: bytes
    last_attempt_tick: int
    attempts: list[tuple[NodeId, int, int]] = field(default_factory=list)
    """(node, term, index) for every time a node accepted it."""
    acknowledged: bool = False
    committed: bool = False


class Workload:
    def __init__(self) -> None:
        self.proposals: dict[bytes, Proposal] = {}
        self._accepted: set[tuple[NodeId, int, int, bytes]] = set()

    def new_data(self, now_tick: int) -> bytes:
        data = b"p%d" % len(self.proposals)
        self.proposals[data] = Proposal(data=data, last_attempt_tick=now_tick)
        return data

    def accepted(self, data: bytes, node_id: NodeId, term: int, index: int, now_tick: int) -> None:
        proposal = self.proposals[data]
        proposal.attempts.append((node_id, term, index))
        proposal.last_attempt_tick = now_tick
        self._accepted.add((node_id, index, term, data))

    def observe_apply(self, node_id: NodeId, entry: Entry) -> None:
        body = body_of(entry)
        proposal = self.proposals.get(body) if body is not None else None
        if proposal is None:
            return
        proposal.committed = True
        if (node_id, entry.index, entry.term, proposal.data) in self._accepted:
            proposal.acknowledged = True

    def pending(self) -> list[Proposal]:
        return [proposal for proposal in self.proposals.values() if not proposal.committed]

    def acknowledged(self) -> list[Proposal]:
        return [proposal for proposal in self.proposals.values() if proposal.acknowledged]
