"""Messaging features built on the replicated log: delay messages (levels and an arbitrary
delivery time), and the consumer's retry and dead-letter topics (docs/messaging.md).

What is here is shared by the services and the Raft mode and knows no replication: the level
table and the checks of a requested delay (``delay.py``), the server-side rewrite of a
message into the schedule topic and back (``rewrite.py``), the scheduler's replicated
progress (``schedule_table.py``), and the retry decisions (``retry.py``). The scheduler that
moves due messages runs on the Raft leader (node/replication/scheduler.py).
"""
