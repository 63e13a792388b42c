"""raftlog.node: the I/O shell where raft, store and gRPC meet (docs/architecture.md).

Rooms:
- ``services/``: the client-facing gRPC services (Producer, Consumer, Admin), wire
  validation, status codes and limits; they reach replication only through ``write_path``.
- ``replication/``: the Raft mode: the replica (its thread, inbox and futures), the Ready
  handler, the durable Raft log in the CommitLog (entries, index, hard state), the control
  records, the producer table, snapshot and segment install.
- ``peer/``: node-to-node traffic: the peer transport, its codec, the RaftPeer service and
  the segment source a follower copies a snapshot from.
- Here: ``config`` (flags, env, TOML), ``process`` (serve one node), ``server`` (the gRPC
  server), ``write_path`` (the seam a second replication mode plugs into) and ``errors``.

Rule: services never import replication or peer; replication and peer meet only in
``process``, which wires a node together.
"""
