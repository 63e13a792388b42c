"""raftlog.proto: see docs/architecture.md."""
