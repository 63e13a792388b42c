"""raftlog.node: see docs/architecture.md."""
