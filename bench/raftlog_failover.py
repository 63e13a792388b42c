"""raftlog's failover figures for the side-by-side bench: SIGKILL the leader of a local 3-node
cluster, or freeze it (SIGSTOP: a long pause, a hung disk), while the typed ``Producer`` (what
a user calls, default settings, idempotent) sends one message at a time, and time the fault to
the first acknowledged send invoked after it. The NATS side's figure is the same shape
(bench/nats_workloads.py ``failover``: nats-py publishing, the stream leader killed).

A killed leader's connections break at once; a frozen one's stay open, so only the client's
leader watch (client/leader_watch.py) moves it on: the two figures side by side show whether a
frozen leader costs about what a dead one does.

Rules this module keeps: every loop and wait is bounded in time; only the node this bench's
``LocalCluster`` started is signalled (by its recorded PID); a frozen node is resumed (SIGCONT)
whatever happens, a killed one restarted, and caught up before the function returns, so runs
can follow one another on one cluster.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from raftlog.bench.cluster import BenchError, topic_name, wait_caught_up
from raftlog.client import Admin, Producer, RaftlogError
from raftlog.testing.local_cluster import LocalCluster

FAULTS = ("kill", "pause")
LOAD_BEFORE_FAULT_S = 0.5
FAILOVER_TIMEOUT_S = 30.0
RESTART_TIMEOUT_S = 60.0


def _leader_node(cluster: LocalCluster) -> str:
    address = cluster.leader_address()
    for node_id, node in cluster.nodes.items():
        if node.address == address:
            return node_id
    raise BenchError(f"no node of the cluster leads (leader reported: {address})")


def measure_failover(cluster: LocalCluster, body_bytes: int, fault: str = "kill") -> float:
    """Seconds from the ``fault`` ("kill" or "pause") of the leader to the first ack of a send
    invoked after it (the topic ``topic_name(body_bytes)`` must exist)."""
    if fault not in FAULTS:
        raise ValueError(f"fault {fault!r}: one of {', '.join(FAULTS)}")
    victim = _leader_node(cluster)
    pid = cluster.nodes[victim].pid
    if pid is None:
        raise BenchError(f"{victim} has no process of ours to signal")
    body = b"x" * body_bytes
    topic = topic_name(body_bytes)
    faulted_at: list[float] = []
    first_ack_s: list[float] = []
    stop = threading.Event()

    def produce(producer: Producer) -> None:
        deadline = time.monotonic() + LOAD_BEFORE_FAULT_S + FAILOVER_TIMEOUT_S
        while not stop.is_set() and time.monotonic() < deadline:
            invoked = time.monotonic()
            try:
                producer.send(topic, body)
            except RaftlogError:
                continue  # the producer's own retries ran out: send the next one
            if faulted_at and invoked >= faulted_at[0]:
                first_ack_s.append(time.monotonic() - faulted_at[0])
                return

    with Producer(cluster.addresses, timeout_s=FAILOVER_TIMEOUT_S) as producer:
        sender = threading.Thread(target=produce, args=(producer,), name="failover-load")
        sender.start()
        try:
            time.sleep(LOAD_BEFORE_FAULT_S)
            faulted_at.append(time.monotonic())
            if fault == "kill":
                cluster.kill(victim)
            else:
                os.kill(pid, signal.SIGSTOP)
            sender.join(LOAD_BEFORE_FAULT_S + FAILOVER_TIMEOUT_S + 1.0)
        finally:
            stop.set()
            if fault == "pause":
                os.kill(pid, signal.SIGCONT)
            sender.join(FAILOVER_TIMEOUT_S + 1.0)
    _recover(cluster, victim, body_bytes, restart=fault == "kill")
    if not first_ack_s:
        raise BenchError(f"no send acknowledged within {FAILOVER_TIMEOUT_S} s of the {fault}")
    return first_ack_s[0]


def _recover(cluster: LocalCluster, victim: str, body_bytes: int, *, restart: bool) -> None:
    """Restart a killed victim; wait until it holds what the leader holds."""
    if restart:
        cluster.restart(victim, wait_timeout_s=RESTART_TIMEOUT_S)
    with Admin(cluster.addresses) as admin:
        # Asked of the others: a victim just resumed still believes it leads (its old term)
        # until it hears of the new one, and would name itself.
        others = [node_id for node_id in cluster.nodes if node_id != victim]
        leader = cluster.leader_address(node_ids=others)
        if leader is None:
            raise BenchError(f"no leader after the {'kill' if restart else 'pause'}")
        wait_caught_up(admin, topic_name(body_bytes), leader, cluster.nodes[victim].address)
