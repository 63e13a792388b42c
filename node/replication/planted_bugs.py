"""Classic bugs the node's replication layer can be told to commit, so the deterministic
simulation (tests/sim) can prove its checkers find a broken Ready handler or Raft log storage,
not only a broken core (the core's own are ``raftlog.raft.types.PlantedBug``).

Rules this module keeps: every bug is off unless a test passes it in; a node never does (no
configuration field, flag or environment variable reaches these); each is one condition at
the place it breaks.
"""

from __future__ import annotations

import enum


class NodePlantedBug(enum.Enum):
    SEND_BEFORE_PERSIST = "send-before-persist"
    """The Ready handler sends every message before it persists and syncs the Ready: a vote or
    an append acknowledgement can promise what a power loss then takes back."""
    VOTE_NOT_SYNCED = "storage-vote-not-synced"
    """The Raft log storage makes the hard state durable only when the term changes, so a vote
    granted within a term is forgotten by a crash."""
    COMMIT_LOG_NOT_SYNCED = "storage-entries-not-synced"
    """The Raft log storage's sync skips the CommitLog fsync: acknowledged entries live only in
    the page cache until a power loss."""
    APPLY_BEFORE_COMMIT = "apply-before-commit"
    """The Ready handler applies (dispatches to consumers) every entry as soon as it is durable
    on this node, without waiting for a majority to hold it: a consumer can read a message a
    failover then erases."""
