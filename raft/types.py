"""Values that cross the Raft core's boundary: messages, entries, hard state, Ready.

Rules this module keeps:
- Every type here is an immutable value (frozen dataclass or enum) except ``Ready``, which the
  core builds fresh for each hand-off and never touches again after ``ready()`` returns it.
- Node ids are strings; wherever a set of ids is turned into a sequence, it is sorted, so the
  behaviour never depends on ``PYTHONHASHSEED``.
- Index 0 / term 0 mean "nothing": the first real entry has index 1.

The Ready contract (what the caller of ``RawNode.ready()`` must do, in this order):
1. Persist ``hard_state`` (if not None), install ``snapshot`` (if not None), and append
   ``entries`` (truncating any conflicting tail first: an entry whose index is already stored
   replaces it and everything after it). When ``must_sync`` is true these writes are fsynced
   before step 2. Term and vote are therefore durable before any message that depends on them
   (a vote grant, an append from a new leader) leaves the node.
2. Send ``messages``. The one exception to "persist first": a LEADER may send its APPEND
   messages before its own write is durable (Raft thesis §10.2.1), because the core counts the
   leader's own copy toward commit only once ``advance()`` reports it stable.
3. Apply ``committed_entries`` to the state machine, in order.
4. Call ``advance(ready)``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

NodeId = str


class MessageType(enum.IntEnum):
    """Raft message kinds. The *_RESP kinds answer the kind named before them."""

    PRE_VOTE = 1
    PRE_VOTE_RESP = 2
    VOTE = 3
    VOTE_RESP = 4
    APPEND = 5
    APPEND_RESP = 6
    HEARTBEAT = 7
    HEARTBEAT_RESP = 8
    SNAPSHOT = 9
    """Leader -> follower: "install the snapshot ``Message.snapshot``". In raftlog the node's
    transport turns this into a segment transfer; the core only does the bookkeeping. The
    leader's caller reports the outcome with ``RawNode.report_snapshot`` (also when dropped)."""
    TIMEOUT_NOW = 10
    """Leader -> transfer target: campaign now, skipping pre-vote and the election timer."""
    READ_INDEX = 11
    """Follower -> leader: ask for a read index on behalf of a local read request."""
    READ_INDEX_RESP = 12


class EntryType(enum.IntEnum):
    NORMAL = 0
    """Application data; ``data`` is opaque to the core. An empty NORMAL entry is the no-op a
    new leader appends on election."""
    CONF_CHANGE = 1
    """``data`` is ``ConfChange.encode()``."""


class Role(enum.IntEnum):
    FOLLOWER = 0
    PRE_CANDIDATE = 1
    CANDIDATE = 2
    LEADER = 3


class ConfChangeType(enum.IntEnum):
    ADD_VOTER = 0
    REMOVE_NODE = 1
    ADD_LEARNER = 2


CONF_CONTEXT_SEPARATOR = b"\x00"
"""Ends ``ConfChange.node_id`` in the encoding when a context follows (ids never hold NUL)."""


@dataclass(frozen=True, slots=True)
class ConfChange:
    """A single-server membership change (Raft thesis §4.1): one node at a time.

    ``context`` is the application's, carried in the entry and never read by the core (in
    raftlog: the member's address, so every replica learns where to dial it). Encoding:
    ``type(1) | node_id (UTF-8) [| NUL | context]``; a change without context encodes as it
    did before contexts existed."""

    type: ConfChangeType
    node_id: NodeId
    context: bytes = b""

    def encode(self) -> bytes:
        encoded = bytes([int(self.type)]) + self.node_id.encode("utf-8")
        if self.context:
            encoded += CONF_CONTEXT_SEPARATOR + self.context
        return encoded

    @classmethod
    def decode(cls, data: bytes) -> ConfChange:
        if not data:
            raise ValueError("empty ConfChange")
        node_id, _, context = data[1:].partition(CONF_CONTEXT_SEPARATOR)
        return cls(ConfChangeType(data[0]), node_id.decode("utf-8"), context)


@dataclass(frozen=True, slots=True)
class ConfState:
    """Cluster membership. Both tuples are sorted and disjoint."""

    voters: tuple[NodeId, ...]
    learners: tuple[NodeId, ...] = ()


@dataclass(frozen=True, slots=True)
class Entry:
    index: int
    term: int
    type: EntryType = EntryType.NORMAL
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class HardState:
    """What must survive a crash: current term, the vote cast in it, and the commit index."""

    term: int = 0
    vote: NodeId | None = None
    commit: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """The point a snapshot covers: the log up to ``index`` (whose term is ``term``) is
    replaced by it. In raftlog the snapshot's data is the CommitLog segments themselves."""

    index: int
    term: int
    conf_state: ConfState


@dataclass(frozen=True, slots=True)
class Message:
    type: MessageType
    source: NodeId
    target: NodeId
    term: int
    log_term: int = 0
    """APPEND: term of the entry at ``log_index``. VOTE/PRE_VOTE: the candidate's last term."""
    log_index: int = 0
    """APPEND: index of the entry just before ``entries``. VOTE/PRE_VOTE: candidate's last
    index. APPEND_RESP: the highest index the follower now matches (or the rejected index)."""
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    """APPEND_RESP with reject: the follower's hint for where to probe next (fast backtrack)."""
    hint_term: int = 0
    """APPEND_RESP with reject: the term of the follower's entry at ``reject_hint`` (0 = none)."""
    snapshot: SnapshotMeta | None = None
    context: bytes = b""
    """READ_INDEX / HEARTBEAT: the read request's id, echoed back; TIMEOUT_NOW/VOTE: b"transfer"
    marks a campaign caused by leadership transfer (it may disturb a live leader)."""


@dataclass(frozen=True, slots=True)
class ReadState:
    """A read request that may be served once the state machine has applied ``index``."""

    index: int
    context: bytes


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state the application may want to observe; never persisted."""

    leader: NodeId | None
    role: Role


@dataclass(slots=True)
class Ready:
    """Everything the application must do next; see this module's docstring for the order."""

    soft_state: SoftState | None = None
    hard_state: HardState | None = None
    snapshot: SnapshotMeta | None = None
    entries: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    committed_entries: list[Entry] = field(default_factory=list)
    read_states: list[ReadState] = field(default_factory=list)
    must_sync: bool = False


class PlantedBug(enum.Enum):
    """Classic Raft bugs the core can be told to commit, so tests can prove the simulation
    finds them. Off unless a test passes them in ``Config.planted_bugs``; never in production."""

    COMMIT_PREVIOUS_TERM_BY_COUNTING = "commit-previous-term-by-counting"
    """Advance commit to an entry of an earlier term because a majority stores it (Figure 8)."""
    VOTE_NOT_PERSISTED = "vote-not-persisted"
    """Grant a vote without putting it in the hard state, so a crash forgets it."""
    SKIP_LOG_MATCHING_CHECK = "skip-log-matching-check"
    """Accept an APPEND without checking the term of the entry at ``log_index``."""


class LogUnavailableError(Exception):
    """The requested index is beyond the stored log."""


class LogCompactedError(Exception):
    """The requested index is below the first stored index (retention deleted it)."""


class ProposalDroppedError(Exception):
    """A proposal was refused; the message says why (not leader, transfer in progress,
    uncommitted-bytes limit, entry too large). Nothing was appended."""


class LogStorage(Protocol):
    """The core's read-only view of the stable log. The application writes to it (while
    handling Ready); the core only reads. Indexes in [first_index(), last_index()] are stored;
    ``term(first_index() - 1)`` is the term of the snapshot point and must also answer."""

    def initial_state(self) -> tuple[HardState, ConfState]:
        """The persisted hard state, and the membership at the snapshot point
        (``first_index() - 1``; for a fresh log, the cluster's bootstrap membership at index
        0). The core replays configuration entries from there up to ``Config.applied_index``."""
        ...

    def entries(self, low: int, high: int, max_bytes: int) -> list[Entry]:
        """Entries [low, high); at least one entry if any is in range, then stop before
        exceeding ``max_bytes`` of ``data``. Raises LogCompactedError / LogUnavailableError."""
        ...

    def term(self, index: int) -> int:
        """Term of the entry at ``index``; raises LogCompactedError / LogUnavailableError."""
        ...

    def first_index(self) -> int: ...

    def last_index(self) -> int: ...

    def snapshot(self) -> SnapshotMeta:
        """The newest snapshot point (index, term, membership), for far-behind followers."""
        ...
