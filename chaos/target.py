"""What the nemesis and the workload act on: the :class:`Target` protocol, and what every
target shares (partition links, status views, reading replicas, waiting for convergence).
chaos/local_target.py implements it over real node processes on 127.0.0.1 (LocalCluster),
chaos/container_target.py over Docker.

A target names its nodes, gives the client addresses, injects process faults (``kill`` =
SIGKILL, ``restart``, ``pause`` = SIGSTOP, ``resume`` = SIGCONT) and, when
``supports_partitions`` is True, network faults between nodes (``block`` directed links, computed
for a partition into groups by :func:`partition_links`; ``heal``). At the end it reads every replica
(:meth:`Target.read_replica`: whole queues from their first offset, and the digest of the
committed CommitLog bytes).

Rules this module keeps: every wait and read loop is bounded in time and in iterations; a
target's ``close`` always heals, resumes every paused node and stops the cluster, and is safe
to call twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc

from raftlog.chaos.history import Entry, QueueKey, ReplicaSnapshot
from raftlog.client import Admin, ClusterStatus, Connection, RaftlogError
from raftlog.proto import client_pb2, client_pb2_grpc

# (from node, to node): traffic from the first to the second.
Link = tuple[str, str]

_PULL_BATCH_MESSAGES = 1024
_MAX_PULLS_PER_QUEUE = 10_000
_STATUS_TIMEOUT_S = 0.5
_READ_TIMEOUT_S = 5.0


class TargetError(RuntimeError):
    """A fault could not be applied or a replica could not be read (the message says why)."""


@dataclass(frozen=True, slots=True)
class NodeView:
    """What one node said about itself: its role and term, and its Raft indexes."""

    node_id: str
    role: str
    term: int
    leader_id: str
    commit_index: int
    applied_index: int
    last_index: int


class Target(Protocol):
    """A cluster the chaos runner drives. Faults are applied by node id."""

    name: str
    supports_partitions: bool
    supports_latency: bool
    # Whether the clients dial through links that ``block`` can cut (link ("client", node)).
    supports_client_partitions: bool
    # The controller members a partition can cut nodes off from (links "n1->c1"); empty
    # unless a master-slave group runs under a controller the target can partition.
    controller_ids: tuple[str, ...]

    def node_ids(self) -> list[str]:
        """Every node, in a stable order."""
        ...

    def connect(self) -> Connection:
        """A new client connection to the cluster, from where the runner runs (the caller
        closes it)."""
        ...

    def start(self) -> None:
        """Start a fresh cluster and wait for a leader."""
        ...

    def close(self) -> None:
        """Heal, resume and stop everything this target started."""
        ...

    def kill(self, node_id: str) -> None:
        """SIGKILL the node (a crash)."""
        ...

    def restart(self, node_id: str) -> None:
        """Start the node again (gracefully stopping it first if it runs) and wait until it
        serves."""
        ...

    def pause(self, node_id: str) -> None:
        """SIGSTOP the node (a silent stall: connections stay open, nothing answers)."""
        ...

    def resume(self, node_id: str) -> None:
        """SIGCONT a paused node."""
        ...

    def block(self, links: Collection[Link], *, silent: bool = False) -> None:
        """Drop traffic on these directed links (only with ``supports_partitions``);
        replaces any earlier block. ``silent``: the traffic vanishes (a blackhole the sender
        only notices by timeouts) instead of connections being refused."""
        ...

    def delay(self, links: Collection[Link], delay_ms: int) -> None:
        """Slow these directed links by about ``delay_ms`` (only with ``supports_latency``);
        replaces any earlier block or delay."""
        ...

    def heal(self) -> None:
        """Restore every link."""
        ...

    def status(self, node_id: str) -> NodeView | None:
        """The node's own view, or None when it does not answer quickly."""
        ...

    def read_replica(self, node_id: str, topic: str) -> ReplicaSnapshot:
        """Every queue of ``topic`` as stored on this node, and its CommitLog digest."""
        ...


def partition_links(node_ids: Sequence[str], groups: Sequence[Collection[str]]) -> set[Link]:
    """The directed links a partition into ``groups`` cuts: two nodes keep talking only when
    some group holds both (so overlapping groups make a bridge: a node in two groups talks
    to both sides). A node in no group is isolated."""
    links: set[Link] = set()
    for a in node_ids:
        for b in node_ids:
            if a != b and not any(a in group and b in group for group in groups):
                links.add((a, b))
    return links


def leader_of(target: Target) -> tuple[str, int] | None:
    """(node id, term) of a node that says it leads, the highest term first; None if none."""
    views = [v for v in (target.status(n) for n in target.node_ids()) if v is not None]
    leaders = sorted((v for v in views if v.role == "leader"), key=lambda v: -v.term)
    return (leaders[0].node_id, leaders[0].term) if leaders else None


def release_faults(target: Target, paused: Collection[str]) -> None:
    """Heal every link and resume every paused node, ignoring what cannot be undone: what a
    target's ``close`` does before it stops the nodes (a frozen node would not stop)."""
    with contextlib.suppress(TargetError):
        target.heal()
    for node_id in sorted(paused):
        with contextlib.suppress(TargetError):
            target.resume(node_id)


def status_view(status: ClusterStatus) -> NodeView:
    """The chaos view of a node's ClusterStatus answer."""
    return NodeView(
        node_id=status.node_id,
        role=status.role,
        term=status.term,
        leader_id=status.leader_id,
        commit_index=status.commit_index,
        applied_index=status.applied_index,
        last_index=status.last_index,
    )


def node_status(address: str, timeout_s: float = _STATUS_TIMEOUT_S) -> NodeView | None:
    """Ask the node at ``address`` (and only it) for its own view."""
    try:
        with Admin([address], timeout_s=timeout_s) as admin:
            return status_view(admin.cluster_status(address=address))
    except RaftlogError:
        return None


def read_queues(address: str, topic: str) -> dict[QueueKey, tuple[Entry, ...]]:
    """Every queue of ``topic`` as the node at ``address`` holds it, from each queue's first
    live offset: (queue offset, body as text). Raises grpc.RpcError when the node does not
    answer."""
    queues: dict[QueueKey, tuple[Entry, ...]] = {}
    with grpc.insecure_channel(address) as channel:
        # The generated stubs are untyped; Any keeps mypy strict about everything else.
        admin_stub: Any = client_pb2_grpc.AdminStub
        consumer_stub: Any = client_pb2_grpc.ConsumerStub
        admin = admin_stub(channel)
        consumer = consumer_stub(channel)
        described = admin.DescribeTopic(
            client_pb2.DescribeTopicRequest(topic=topic), timeout=_READ_TIMEOUT_S
        )
        first_offsets = {q.queue_id: q.min_queue_offset for q in described.queues}
        for queue_id in range(described.topic.queue_count):
            offset = first_offsets.get(queue_id, 0)
            entries: list[Entry] = []
            for _ in range(_MAX_PULLS_PER_QUEUE):
                answer = consumer.Pull(
                    client_pb2.PullRequest(
                        topic=topic,
                        queue_id=queue_id,
                        queue_offset=offset,
                        max_messages=_PULL_BATCH_MESSAGES,
                        this_replica=True,  # this node's copy, whatever its role
                    ),
                    timeout=_READ_TIMEOUT_S,
                )
                if not answer.messages:
                    break
                entries += [
                    (int(m.queue_offset), bytes(m.body).decode(errors="replace"))
                    for m in answer.messages
                ]
                # Continue after what was returned; a non-advancing answer would loop.
                offset = max(int(answer.next_queue_offset), entries[-1][0] + 1)
            queues[(topic, queue_id)] = tuple(entries)
    return queues


def commitlog_digest(data_dir: str | Path) -> tuple[str, int]:
    """SHA-256 over the CommitLog files of one node (names and bytes, in name order) and
    how many bytes they hold. The runner takes it only after every node has applied the same
    index and the writers stopped, so healthy replicas give the same digest."""
    digest = hashlib.sha256()
    total_bytes = 0
    directory = Path(data_dir) / "store" / "commitlog"
    for path in sorted(directory.iterdir()):
        data = path.read_bytes()
        digest.update(path.name.encode())
        digest.update(data)
        total_bytes += len(data)
    return digest.hexdigest(), total_bytes


def wait_converged(target: Target, timeout_s: float, interval_s: float = 0.2) -> NodeView | None:
    """Wait until every node answers with one leader known and the same applied index equal
    to its last index; returns the leader's view, or None on timeout."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / interval_s) + 2):
        views = [target.status(n) for n in target.node_ids()]
        answered = [v for v in views if v is not None]
        if len(answered) == len(views):
            applied = {v.applied_index for v in answered}
            last = {v.last_index for v in answered}
            leaders = [v for v in answered if v.role == "leader"]
            if len(applied) == 1 and applied == last and leaders:
                return leaders[0]
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    return None
