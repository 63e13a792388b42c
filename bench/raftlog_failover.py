"""raftlog's failover figure for the side-by-side bench: SIGKILL the leader of a local 3-node
cluster while a producer sends, and time the kill to the first acknowledged produce of a send
invoked after the kill.

The producer is a raw gRPC loop, the same shape as the NATS side's (bench/nats_workloads.py):
one single-message request in flight, each waiting at most ``PRODUCE_TIMEOUT_S``, retried
every ``RETRY_INTERVAL_S`` on any error. On an error it moves to the next member in address
order (a refusing follower, the dead leader's closed port and a timeout all look alike), so
the figure is the cluster's election plus at most one member rotation, not a client's back-off.
(bench/latency.py measures failover through the typed ``Producer`` instead.)

Rules this module keeps: every loop and wait is bounded in time; only the node this bench's
``LocalCluster`` started is killed (by its recorded PID); the killed node is restarted and
caught up before the function returns, so runs can follow one another on one cluster.
"""

from __future__ import annotations

import threading
import time

import grpc

from raftlog.bench.cluster import (
    CHANNEL_OPTIONS,
    PRODUCER_STUB,
    BenchError,
    request_pool,
    topic_name,
    wait_caught_up,
)
from raftlog.client.admin import Admin
from raftlog.testing.local_cluster import LocalCluster

PRODUCE_TIMEOUT_S = 0.5
RETRY_INTERVAL_S = 0.01
LOAD_BEFORE_KILL_S = 0.5
FAILOVER_TIMEOUT_S = 30.0
RESTART_TIMEOUT_S = 60.0


def _leader_node(cluster: LocalCluster) -> str:
    address = cluster.leader_address()
    for node_id, node in cluster.nodes.items():
        if node.address == address:
            return node_id
    raise BenchError(f"no node of the cluster leads (leader reported: {address})")


def measure_failover(cluster: LocalCluster, body_bytes: int) -> float:
    """Seconds from SIGKILL of the leader to the first ack of a send invoked after it (the
    topic ``topic_name(body_bytes)`` must exist)."""
    killed = _leader_node(cluster)
    addresses = cluster.addresses
    start_at = addresses.index(cluster.nodes[killed].address)
    requests = request_pool(body_bytes, 1)
    killed_at: list[float] = []
    first_ack_s: list[float] = []
    stop = threading.Event()
    channels = [grpc.insecure_channel(a, options=CHANNEL_OPTIONS) for a in addresses]
    stubs = [PRODUCER_STUB(channel) for channel in channels]

    def produce() -> None:
        target = start_at
        sent = 0
        deadline = time.monotonic() + LOAD_BEFORE_KILL_S + FAILOVER_TIMEOUT_S
        while not stop.is_set() and time.monotonic() < deadline:
            invoked = time.monotonic()
            try:
                stubs[target].Produce(requests[sent % len(requests)], timeout=PRODUCE_TIMEOUT_S)
            except grpc.RpcError:
                target = (target + 1) % len(stubs)
                time.sleep(RETRY_INTERVAL_S)
                continue
            sent += 1
            if killed_at and invoked >= killed_at[0]:
                first_ack_s.append(time.monotonic() - killed_at[0])
                return

    sender = threading.Thread(target=produce, name="failover-load", daemon=True)
    try:
        sender.start()
        time.sleep(LOAD_BEFORE_KILL_S)
        killed_at.append(time.monotonic())
        cluster.kill(killed)
        sender.join(LOAD_BEFORE_KILL_S + FAILOVER_TIMEOUT_S + 1.0)
    finally:
        stop.set()
        sender.join(PRODUCE_TIMEOUT_S + 1.0)
        for channel in channels:
            channel.close()
    cluster.restart(killed, wait_timeout_s=RESTART_TIMEOUT_S)
    with Admin(cluster.addresses) as admin:
        leader = cluster.leader_address()
        if leader is None:
            raise BenchError("no leader after the failover")
        wait_caught_up(admin, topic_name(body_bytes), leader, cluster.nodes[killed].address)
    if not first_ack_s:
        raise BenchError(f"no produce acknowledged within {FAILOVER_TIMEOUT_S} s of the kill")
    return first_ack_s[0]
