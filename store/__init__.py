"""raftlog.store: the single-node storage engine (CommitLog, ConsumeQueue, IndexFile).

Rules: knows nothing of Raft, gRPC or nodes; imports only the standard library and itself.
Formats follow ../shared/spec/STORE_FORMAT.md byte for byte.
"""
