"""Master-slave replication (replication = "master-slave"): RocketMQ's classic HA roles,
beside the Raft mode in node/replication/, on the same store.

- ``write_path``: the WritePath of this mode (the master writes, a slave redirects);
- ``master_state``, ``in_sync``: the master's view of its slaves, the in-sync set and the
  SYNC_MASTER wait;
- ``ha_service``: the master's end of the HA stream; ``replicator``: the slave's end;
- ``group``: the running pieces of one member, started and stopped together.
"""
