"""The seam that decides who may write, and when a write is acknowledged.

A node's gRPC services never touch replication directly: writes (produce, consumer-group
offset commits, topic creation), the linearizable reads (consumer-group offsets), leadership
transfer and the cluster view all go through a ``WritePath``. There are
two: the Raft replica (node/replication/): only the leader writes, and a write is
acknowledged once its entry is committed (a majority has it, fsynced or written as
configured) and applied; and the master-slave group (node/masterslave/): only the master
writes, and a SYNC_MASTER acknowledges once its in-sync slaves hold the write.

Rules every implementation keeps:
- Refuse before proposing when it may not write (NotLeaderError): nothing was written.
- Acknowledge only what is durable as configured and visible to readers (dispatched).
- When the outcome cannot be learned in time, raise UnknownOutcomeError, never a failure.
- Reads (pull, queries) do not go through here: any member serves them from its store, which
  only ever shows committed messages. The one exception is where consumers are sent:
  ``check_read`` lets a master-slave slave send them on to its master (``slave_read_enable``
  off, the RocketMQ default) while it copies from a live master.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from raftlog.node.control import ChangeAccess
from raftlog.store.message_store import Message, PutResult
from raftlog.store.topic_config import TopicConfig


@dataclass(frozen=True, slots=True)
class ProduceOutcome:
    """Where a produced batch landed, in request order."""

    results: list[PutResult]
    queue_ids: list[int]
    store_timestamp_ms: int
    duplicate: bool
    raft_index: int
    raft_term: int
    # Master-slave mode: SEND_OK, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (the last two:
    # stored on the master, not yet on enough slaves). Raft mode acknowledges only SEND_OK.
    replication_status: str = "SEND_OK"


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member as the answering node sees it; progress fields only on the leader."""

    node_id: str
    address: str
    role: str  # "leader", "follower", "pre-candidate", "candidate", "learner", "unknown"
    voter: bool
    has_progress: bool = False
    match_index: int = 0
    lag_entries: int = 0
    replication_state: str = ""  # "probe", "replicate", "snapshot" (leader only)
    inflight_appends: int = 0
    recent_active: bool = False
    # Master-slave mode (seen from the master): bytes and time behind, and in-sync membership.
    lag_bytes: int = 0
    lag_ms: int = 0
    in_sync: bool = False


@dataclass(frozen=True, slots=True)
class ClusterView:
    cluster_id: str
    node_id: str
    role: str
    leader_id: str | None
    leader_address: str | None
    term: int
    commit_index: int
    applied_index: int
    last_index: int
    members: list[MemberView]
    transferring_to: str | None
    # "raft", or "master-slave" (then term is the master epoch, commit_index the confirmed
    # CommitLog offset, applied_index the dispatched one, last_index the CommitLog's end).
    replication: str = "raft"
    broker_name: str = ""
    broker_role: str = ""


class WritePath(Protocol):
    def produce(
        self,
        messages: Sequence[Message],
        *,
        producer_id: str,
        sequence: int,
        timeout_s: float,
    ) -> ProduceOutcome:
        """Store one batch (one topic) atomically; ``producer_id`` "" = not idempotent."""
        ...

    def produce_encoded(
        self,
        topic: str,
        records: bytes,
        *,
        producer_id: str,
        sequence: int,
        timeout_s: float,
    ) -> ProduceOutcome:
        """Store a batch the producer encoded (records back to back, broker fields zero)."""
        ...

    def commit_offsets(
        self, group: str, offsets: Sequence[tuple[str, int, int]], *, timeout_s: float
    ) -> int:
        """Commit (topic, queue_id, next_queue_offset) for ``group`` through the log; returns
        the index of the entry that holds the commit."""
        ...

    def fetch_offsets(
        self, group: str, queues: Sequence[tuple[str, int]], *, timeout_s: float
    ) -> list[int | None]:
        """The group's committed next offsets (None = never committed), read linearizably."""
        ...

    def create_topic(
        self, topic: str, queue_count: int, *, timeout_s: float
    ) -> tuple[TopicConfig, bool]:
        """Create a topic through the log; returns its config and whether it was created now
        (False: it existed with this queue count). A different queue count is an error."""
        ...

    def change_access(self, change: ChangeAccess, *, timeout_s: float) -> None:
        """Change an access rule through the log; applied on this node when it returns."""
        ...

    def transfer_leadership(self, target_id: str | None, *, timeout_s: float) -> ClusterView:
        """Hand leadership to ``target_id`` (None: the most up-to-date voter) and wait."""
        ...

    def cluster_view(self) -> ClusterView:
        """This node's view of the cluster (never blocks on the network)."""
        ...

    def check_read(self) -> None:
        """Raise NotLeaderError naming the member consumers should pull from instead, when
        this one should not serve their pulls now; return when it serves them."""
        ...

    def catch_up(self, timeout_s: float) -> bool:
        """Wait until this member applied everything the group committed before the call
        (a member about to say that a topic does not exist may only be behind); True when it
        did within ``timeout_s``, False when that could not be confirmed."""
        ...

    def wait_visible(self, after_physical_offset: int, timeout_s: float) -> int:
        """Block until readers can see past ``after_physical_offset`` (new messages were
        dispatched) or the timeout passes; returns the current dispatched offset. Long polling
        uses it."""
        ...
