"""raftlog.bench: see docs/architecture.md."""
