"""raftlog.node: the I/O shell where raft, store and (later) gRPC meet (see
docs/architecture.md).

The durable Raft log (the Raft log IS the CommitLog, DLedger's model):
- raft_entry: the entry envelope codec (term, index, type, CRC over header and payload);
- raft_index: entry -> (physical_offset, size, term), fixed-width units in files;
- hard_state_file: term, vote and commit, replaced atomically and CRC-checked;
- raft_log_storage: ``RaftLogStorage``, the core's LogStorage over the CommitLog, with the
  Ready-loop writers and the leader's position planning.
"""
