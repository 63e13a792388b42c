"""Node-to-node traffic: ``transport`` (outgoing Raft message streams), ``codec`` (Raft
messages <-> peer.proto), ``service`` (the RaftPeer gRPC service that feeds the replica) and
``segment_source`` (serves CommitLog segments to a follower installing a snapshot).
"""
