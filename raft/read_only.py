"""ReadOnly: the leader's queue of read-index requests waiting for a heartbeat quorum.

The read-index protocol (Raft thesis §6.4), as raftlog runs it:
1. A read request reaches the leader (``RawNode.read_index`` on the leader, or a READ_INDEX
   forwarded by a follower). A leader that has not yet committed an entry of its own term
   keeps the request aside until it has (its commit index could be stale before that).
2. The leader records ``read_index = commit_index`` with the request's context and sends a
   HEARTBEAT round carrying that context.
3. Once a majority of voters (the leader included) echoed the context, the leader knows it was
   still the leader when the request arrived; the request and every request queued before it
   are released as ReadState(read_index, context) - locally, or in a READ_INDEX_RESP to the
   follower that asked.
4. The application serves the read once it has applied ``read_index``.
A leader that steps down forgets its queue: those requests get no answer and the client
retries (a request is never answered wrongly, only possibly not at all).

Rules this module keeps: requests leave in arrival order; a context already queued is not
queued twice; only the requester and ack ids are kept per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftlog.raft.types import NodeId


@dataclass(slots=True)
class ReadIndexRequest:
    context: bytes
    read_index: int
    requester: NodeId
    acks: set[NodeId] = field(default_factory=set)


class ReadOnly:
    def __init__(self) -> None:
        # Insertion-ordered: the order requests arrived in.
        self._pending: dict[bytes, ReadIndexRequest] = {}

    def add_request(self, read_index: int, context: bytes, requester: NodeId) -> bool:
        """Queue a request; False if a request with this context is already queued."""
        if context in self._pending:
            return False
        self._pending[context] = ReadIndexRequest(context, read_index, requester)
        return True

    def receive_ack(self, source: NodeId, context: bytes) -> set[NodeId] | None:
        """Record that ``source`` answered the heartbeat carrying ``context``; returns the
        ids that have acknowledged it so far (None if no such request is queued)."""
        request = self._pending.get(context)
        if request is None:
            return None
        request.acks.add(source)
        return request.acks

    def advance(self, context: bytes) -> list[ReadIndexRequest]:
        """Release the request with ``context`` and every request queued before it."""
        if context not in self._pending:
            return []
        released: list[ReadIndexRequest] = []
        for queued_context in list(self._pending):
            released.append(self._pending.pop(queued_context))
            if queued_context == context:
                break
        return released

    def last_pending_context(self) -> bytes | None:
        if not self._pending:
            return None
        return next(reversed(self._pending))

    def pending_count(self) -> int:
        return len(self._pending)

    def reset(self) -> None:
        self._pending.clear()
