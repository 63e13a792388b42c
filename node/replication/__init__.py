"""Raft replication, where the Raft log IS the CommitLog (DLedger's model).

- ``replica``: the Raft implementation of ``WritePath``: the loop thread, inbox, timers and
  futures;
- ``ready``: the single-threaded, clock-free handler of one Raft ``Ready`` (persist, send,
  apply), run by the replica and by the deterministic simulation alike;
- ``raft_log_storage``, ``raft_index``, ``raft_entry``, ``hard_state_file``: the durable log;
- ``control``: control records (topics, consumer offsets, producer sequences) applied in log
  order; ``producer_table``: idempotent-producer sequences;
- ``snapshot_install``, ``segment_installer``: a far-behind follower's snapshot (segments).
"""
