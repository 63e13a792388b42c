"""raftlog.raft: the Raft consensus core as a pure state machine (etcd-io/raft style).

Rules: standard library only; no sockets, threads, asyncio, clock, file I/O or global random.
Inputs are tick(), step(message) and propose(data); the output is a Ready value.

Modules: types (boundary values, the Ready contract), config (limits), raw_node (the public
entry, membership and limits documented there), core (role logic), raft_log + unstable (the
log view), progress (per-follower replication state), quorum (majority arithmetic), membership
(single-server changes), read_only (read-index), status (observation), memory_storage
(an in-memory LogStorage).
"""

from raftlog.raft.config import Config
from raftlog.raft.memory_storage import MemoryStorage
from raftlog.raft.progress import ProgressState
from raftlog.raft.raw_node import RawNode
from raftlog.raft.status import ProgressStatus, Status

__all__ = ["Config", "MemoryStorage", "ProgressState", "ProgressStatus", "RawNode", "Status"]
