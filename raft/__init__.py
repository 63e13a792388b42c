"""raftlog.raft: the Raft consensus core as a pure state machine (etcd-io/raft style).

Rules: standard library only; no sockets, threads, asyncio, clock, file I/O or global random.
Inputs are tick(), step(message) and propose(data); the output is a Ready value.
"""
