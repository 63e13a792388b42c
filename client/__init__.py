"""raftlog.client: see docs/architecture.md."""
