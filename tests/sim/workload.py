"""The simulated clients' proposals: what was proposed, where, and what was acknowledged.

Rules this module keeps:
- Every proposal carries unique data (``b"p<id>"``), so an applied entry names its proposal.
- A proposal is *acknowledged* when the node that accepted it applies it at the index and term
  ``propose`` returned: that is the moment a leader would answer the client "committed".
- A proposal is *pending* until some node applies it; the heal phase re-proposes pending ones
  (at-least-once, as a retrying client does), so a proposal may commit more than once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftlog.raft.types import Entry, NodeId


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
        proposal = self.proposals.get(entry.data)
        if proposal is None:
            return
        proposal.committed = True
        if (node_id, entry.index, entry.term, entry.data) in self._accepted:
            proposal.acknowledged = True

    def pending(self) -> list[Proposal]:
        return [proposal for proposal in self.proposals.values() if not proposal.committed]

    def acknowledged(self) -> list[Proposal]:
        return [proposal for proposal in self.proposals.values() if proposal.acknowledged]
