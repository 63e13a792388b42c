"""raftlog.chaos: see docs/architecture.md."""
