"""RaftWritePath: the WritePath (node/write_path.py) of the Raft mode -- what the gRPC
services call, on their own threads, to write, read offsets linearizably, create topics, move
leadership and see the cluster, over one member's Raft loop (replica.py).

Rules this module keeps:
- Validate before anything reaches the loop; a refused request wrote nothing.
- Refuse at once when this member may not write (NotLeaderError with the leader it knows),
  except that a member which lost its leader recently waits, within the call's time, for the
  election, and a new leader for its inherited log to be applied (it may create the very
  topic the request names), so the client gets an answer rather than a guess.
- A write whose proposal was not made when the caller gave up is refused (retry is safe);
  one that was proposed is an unknown outcome, never a failure.
- Control commands (topics, consumer offsets) go through the log like writes.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Sequence

from raftlog.node.control import (
    ChangeAccess,
    CommitOffsets,
    ControlCommand,
    CreateTopic,
    control_message,
)
from raftlog.node.errors import (
    InvalidRequestError,
    NodeError,
    NotLeaderError,
    OverloadedError,
    UnknownOutcomeError,
)
from raftlog.node.replication.proposals import Proposal
from raftlog.node.replication.raft_entry import envelope_size_bytes
from raftlog.node.replication.read_barrier import ReadBarrier
from raftlog.node.replication.replica import Replica
from raftlog.node.write_checks import (
    check_encoded_topics,
    check_new_topic,
    check_offsets,
    existing_topic,
    refuse_reserved,
)
from raftlog.node.write_path import ClusterView, ProduceOutcome
from raftlog.raft.types import EntryType
from raftlog.store.errors import (
    BodyTooLargeError,
)
from raftlog.store.message_store import BlockEntry
from raftlog.store.message_store import Message as StoreMessage
from raftlog.store.topic_config import TopicConfig


class RaftWritePath:
    """Implements node.write_path.WritePath over a Replica."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica
        self._store = replica.store
        self._barrier = ReadBarrier(replica)

    def _submit(self, proposal: Proposal, timeout_s: float) -> object:
        self._replica.submit(proposal)
        try:
            return proposal.future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            if proposal.future.cancel():
                raise self._not_leader_for_timeout() from None
            raise UnknownOutcomeError(
                f"the write was proposed but not committed within {timeout_s:.1f} s; it may "
                "still commit"
            ) from None

    def _not_leader_for_timeout(self) -> NodeError:
        view = self._replica.view
        if view.role == "leader":
            return OverloadedError("the leader could not take the write in time; retry")
        leader = view.leader_id
        if leader is None or leader == self._replica.settings.node_id:
            return NotLeaderError(None, None, view.term)
        return NotLeaderError(leader, view.leader_address, view.term)

    def _check_batch_fits(self, block_size_bytes: int) -> None:
        segment_size = self._store.commit_log.segment_size_bytes
        # Room for the envelope and an idempotence marker record.
        if envelope_size_bytes(EntryType.NORMAL, block_size_bytes) + 1024 > segment_size:
            raise BodyTooLargeError(
                f"the batch encodes to {block_size_bytes} bytes; one CommitLog segment "
                f"({segment_size} bytes) must hold it: send smaller batches"
            )

    def _check_leader_now(self, wait_s: float = 0.0) -> None:
        """Raise NotLeaderError unless this member leads. With ``wait_s``, a member that lost
        its leader recently (an election is under way) first waits up to that long for one,
        so the caller gets a redirect the moment a leader is elected rather than backing off
        and guessing when to retry."""
        replica = self._replica
        view = replica.view
        lost_at = replica.leader_lost_at
        if view.leader_id is None and wait_s > 0 and lost_at is not None:
            wait_until_s = min(time.monotonic() + wait_s, lost_at + replica.election_window_s)
            with replica.leader_changed:
                replica.leader_changed.wait_for(
                    lambda: replica.view.leader_id is not None or replica.stopping.is_set(),
                    max(0.0, wait_until_s - time.monotonic()),
                )
            view = replica.view
        if view.role == "leader" and not replica.write_ready and wait_s > 0:
            # A new leader takes writes once it applied its inherited log (which may create
            # the very topic this write names): wait for that rather than refuse the topic.
            with replica.leader_changed:
                replica.leader_changed.wait_for(
                    lambda: (
                        replica.write_ready
                        or replica.view.role != "leader"
                        or replica.stopping.is_set()
                    ),
                    wait_s,
                )
            view = replica.view
        if view.role != "leader":
            leader = view.leader_id
            if leader is None:
                raise NotLeaderError(None, None, view.term)
            raise NotLeaderError(leader, view.leader_address, view.term)

    def produce(
        self,
        messages: Sequence[StoreMessage],
        *,
        producer_id: str,
        sequence: int,
        timeout_s: float,
    ) -> ProduceOutcome:
        self._check_leader_now(wait_s=timeout_s)
        self._store.check_writable()
        refuse_reserved({m.topic for m in messages})
        block, entries = self._store.encode_messages(messages)
        return self._produce_block(block, entries, producer_id, sequence, timeout_s)

    def produce_encoded(
        self,
        topic: str,
        records: bytes,
        *,
        producer_id: str,
        sequence: int,
        timeout_s: float,
    ) -> ProduceOutcome:
        self._check_leader_now(wait_s=timeout_s)
        self._store.check_writable()
        entries = self._store.check_encoded(records)
        check_encoded_topics(topic, entries)
        return self._produce_block(
            bytearray(records), entries, producer_id, sequence, timeout_s, encoded=True
        )

    def _produce_block(
        self,
        block: bytearray,
        entries: list[BlockEntry],
        producer_id: str,
        sequence: int,
        timeout_s: float,
        *,
        encoded: bool = False,
    ) -> ProduceOutcome:
        if not entries:
            raise InvalidRequestError("the batch holds no message")
        self._check_batch_fits(len(block))
        proposal = Proposal(
            block, entries, producer_id=producer_id, sequence=sequence, encoded=encoded
        )
        outcome = self._submit(proposal, timeout_s)
        assert isinstance(outcome, ProduceOutcome)
        return outcome

    def _control(self, command: ControlCommand, timeout_s: float) -> int:
        """Commit ``command`` through the log; returns its entry's index."""
        self._check_leader_now()
        self._store.check_writable()
        block, entries = self._store.encode_messages([control_message(command)])
        proposal = Proposal(block, entries, control=command)
        self._submit(proposal, timeout_s)
        return proposal.index

    def commit_offsets(
        self, group: str, offsets: Sequence[tuple[str, int, int]], *, timeout_s: float
    ) -> int:
        # A lagging follower redirects, and a new leader applies its log first, rather than
        # answering NOT_FOUND for a topic it has not applied yet.
        self._check_leader_now(wait_s=timeout_s)
        check_offsets(self._store, offsets)
        return self._control(CommitOffsets(group, tuple(offsets)), timeout_s)

    def fetch_offsets(
        self, group: str, queues: Sequence[tuple[str, int]], *, timeout_s: float
    ) -> list[int | None]:
        self._check_leader_now()
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        context = os.urandom(16)
        self._replica.read_index(context, future)
        try:
            future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            self._replica.forget_read(context)
            raise UnknownOutcomeError(
                f"the read did not finish within {timeout_s:.1f} s (no quorum answered)"
            ) from None
        return [self._store.fetch_consumer_offset(group, t, q) for t, q in queues]

    def create_topic(
        self, topic: str, queue_count: int, *, timeout_s: float
    ) -> tuple[TopicConfig, bool]:
        check_new_topic(self._store, topic, queue_count)
        self._check_leader_now(wait_s=timeout_s)  # the topic may be in its unapplied log
        existing = existing_topic(self._store, topic, queue_count)
        if existing is not None:
            return existing, False
        self._control(CreateTopic(topic, queue_count), timeout_s)
        return self._store.describe_topic(topic), True

    def change_access(self, change: ChangeAccess, *, timeout_s: float) -> None:
        self._check_leader_now(wait_s=timeout_s)
        self._control(change, timeout_s)

    def transfer_leadership(self, target_id: str | None, *, timeout_s: float) -> ClusterView:
        self._check_leader_now()
        settings = self._replica.settings
        if target_id == settings.node_id:
            return self._replica.view
        if target_id is not None and target_id not in settings.peer_addresses:
            raise InvalidRequestError(f"no member is called {target_id!r}")
        return self._replica.transfer_leadership(target_id, timeout_s)

    def cluster_view(self) -> ClusterView:
        return self._replica.view

    def check_read(self) -> None:
        """Every Raft member serves pulls: a follower's store shows only committed entries."""

    def catch_up(self, timeout_s: float) -> bool:
        return self._barrier.wait(timeout_s)

    def wait_visible(self, after_physical_offset: int, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        with self._replica.visible:
            while (
                self._store.dispatched_physical_offset <= after_physical_offset
                and not self._replica.stopping.is_set()
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._replica.visible.wait(remaining)
        return self._store.dispatched_physical_offset
