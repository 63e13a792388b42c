"""The client's plain data: what a caller sends and receives, free of protobuf types.

Rules this module keeps: every class is a frozen dataclass with units in its field names
(``*_ms`` milliseconds since the Unix epoch, ``*_bytes`` bytes); conversions from the wire
(``from_proto``) live beside the class they build, so the rest of the client never reads a
protobuf message field by field (client/pulled_records.py builds Messages from a fast Pull's
stored records).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from raftlog.proto import client_pb2

# Lower-case role and replication-state names, as the CLI prints them.
ROLE_NAMES: dict[int, str] = {
    client_pb2.MEMBER_ROLE_UNSPECIFIED: "unknown",
    client_pb2.MEMBER_ROLE_UNKNOWN: "unknown",
    client_pb2.MEMBER_ROLE_FOLLOWER: "follower",
    client_pb2.MEMBER_ROLE_PRE_CANDIDATE: "pre-candidate",
    client_pb2.MEMBER_ROLE_CANDIDATE: "candidate",
    client_pb2.MEMBER_ROLE_LEADER: "leader",
    client_pb2.MEMBER_ROLE_LEARNER: "learner",
}
REPLICATION_STATE_NAMES: dict[int, str] = {
    client_pb2.REPLICATION_STATE_UNSPECIFIED: "",
    client_pb2.REPLICATION_STATE_PROBE: "probe",
    client_pb2.REPLICATION_STATE_REPLICATE: "replicate",
    client_pb2.REPLICATION_STATE_SNAPSHOT: "snapshot",
}


def _host(host_port: Any) -> str:
    """``"ip:port"`` (IPv6 in brackets), or "" for an unset host."""
    if not host_port.ip:
        return ""
    return host_text(host_port.ip, host_port.port)


def host_text(ip: str, port: int) -> str:
    """``ip:port``, an IPv6 address in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One message to send (``Producer.send_batch``). Set at most one of ``queue_id`` and
    ``sharding_key``; neither lets the server pick a queue (round robin). ``uniq_key`` ""
    makes the producer fill a fresh UUID (indexed for ``Admin.query_by_key``)."""

    body: bytes
    keys: Sequence[str] = ()
    tags: str = ""
    queue_id: int | None = None
    sharding_key: str | None = None
    properties: Mapping[str, str] | Sequence[tuple[str, str]] = ()
    uniq_key: str = ""
    flag: int = 0
    born_timestamp_ms: int = 0

    def __post_init__(self) -> None:
        if self.queue_id is not None and self.sharding_key is not None:
            raise ValueError("set at most one of queue_id and sharding_key")
        if not isinstance(self.body, bytes | bytearray | memoryview):
            raise TypeError(f"body must be bytes, not {type(self.body).__name__}")


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where one sent message landed. ``duplicate`` is True when the server recognised a
    resend of an already stored batch (idempotent producer) and repeated the first answer.
    ``send_status`` is RocketMQ's: ``SEND_OK``, or, from a master-slave SYNC_MASTER,
    ``FLUSH_SLAVE_TIMEOUT`` / ``SLAVE_NOT_AVAILABLE``: the message IS stored on the master,
    but not yet on as many slaves as the group requires (``replicated`` is False)."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    msg_id: str
    duplicate: bool = False
    uniq_key: str = ""
    store_timestamp_ms: int = 0
    send_status: str = "SEND_OK"
    # A half message (send_in_transaction): the queue of ``topic`` a commit writes it to.
    transaction_queue_id: int = 0

    @property
    def replicated(self) -> bool:
        return self.send_status == "SEND_OK"


@dataclass(frozen=True, slots=True)
class Message:
    """A message as stored (received by a consumer or a query)."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    msg_id: str
    body: bytes
    born_timestamp_ms: int = 0
    store_timestamp_ms: int = 0
    born_host: str = ""
    store_host: str = ""
    keys: tuple[str, ...] = ()
    tags: str = ""
    uniq_key: str = ""
    properties: tuple[tuple[str, str], ...] = ()
    flag: int = 0
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_size_bytes: int = 0
    body_crc: int = 0
    # A retried message (client/retry_reader.py): the group's retry topic it was pulled from,
    # where queue_id and queue_offset are; ``topic`` is then the topic it was first consumed
    # from. "" for every other message.
    pulled_topic: str = ""

    @classmethod
    def from_proto(cls, stored: Any) -> Message:
        """Build from a ``raftlog.v1.StoredMessage``."""
        return cls(
            topic=stored.topic,
            queue_id=stored.queue_id,
            queue_offset=stored.queue_offset,
            physical_offset=stored.physical_offset,
            msg_id=stored.msg_id,
            body=bytes(stored.body),
            born_timestamp_ms=stored.born_timestamp_ms,
            store_timestamp_ms=stored.store_timestamp_ms,
            born_host=_host(stored.born_host),
            store_host=_host(stored.store_host),
            keys=tuple(stored.keys),
            tags=stored.tags,
            uniq_key=stored.uniq_key,
            properties=tuple((p.name, p.value) for p in stored.properties),
            flag=stored.flag,
            sys_flag=stored.sys_flag,
            reconsume_times=stored.reconsume_times,
            prepared_transaction_offset=stored.prepared_transaction_offset,
            store_size_bytes=stored.store_size_bytes,
            body_crc=stored.body_crc,
        )


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic and its queue count (queues are numbered 0 .. queue_count - 1)."""

    name: str
    queue_count: int

    @classmethod
    def from_proto(cls, info: Any) -> TopicInfo:
        """Build from a ``raftlog.v1.TopicInfo``."""
        return cls(name=info.name, queue_count=info.queue_count)


@dataclass(frozen=True, slots=True)
class TopicCreation:
    """The answer to ``Admin.create_topic``: ``created`` is False when nothing changed."""

    topic: TopicInfo
    created: bool


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One queue's bounds on the answering member (``max_queue_offset`` is one past the
    last message; ``last_store_timestamp_ms`` is 0 for an empty queue)."""

    queue_id: int
    min_queue_offset: int
    max_queue_offset: int
    last_store_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic with its queues' bounds, as one member sees them."""

    topic: TopicInfo
    queues: tuple[QueueInfo, ...]

    @classmethod
    def from_proto(cls, response: Any) -> TopicDescription:
        """Build from a ``raftlog.v1.DescribeTopicResponse``."""
        return cls(
            topic=TopicInfo.from_proto(response.topic),
            queues=tuple(
                QueueInfo(
                    queue_id=q.queue_id,
                    min_queue_offset=q.min_queue_offset,
                    max_queue_offset=q.max_queue_offset,
                    last_store_timestamp_ms=q.last_store_timestamp_ms,
                )
                for q in response.queues
            ),
        )


@dataclass(frozen=True, slots=True)
class Member:
    """One cluster member as the answering node sees it. The progress fields (match index,
    lag, replication state...) are meaningful only when ``has_progress`` (leader's view)."""

    node_id: str
    address: str
    role: str
    voter: bool
    has_progress: bool = False
    match_index: int = 0
    lag_entries: int = 0
    replication_state: str = ""
    inflight_appends: int = 0
    recent_active: bool = False
    # Master-slave mode, from the master's view: see ClusterStatus.
    lag_bytes: int = 0
    lag_ms: int = 0
    in_sync: bool = False
    # The member's Prometheus endpoint; only on the answering node's own entry ("" = none).
    metrics_url: str = ""

    @classmethod
    def from_proto(cls, member: Any) -> Member:
        """Build from a ``raftlog.v1.Member``."""
        return cls(
            node_id=member.node_id,
            address=member.address,
            role=ROLE_NAMES.get(member.role, "unknown"),
            voter=member.voter,
            has_progress=member.has_progress,
            match_index=member.match_index,
            lag_entries=member.lag_entries,
            replication_state=REPLICATION_STATE_NAMES.get(member.replication_state, ""),
            inflight_appends=member.inflight_appends,
            recent_active=member.recent_active,
            lag_bytes=member.lag_bytes,
            lag_ms=member.lag_ms,
            in_sync=member.in_sync,
            metrics_url=member.metrics_url,
        )


@dataclass(frozen=True, slots=True)
class AclRule:
    """``subject`` may do ``permissions`` ("admin", "consume", "produce") on the topics
    ``topic_pattern`` names (a topic, a prefix ending in "*", or "*")."""

    subject: str
    topic_pattern: str
    permissions: tuple[str, ...]

    @classmethod
    def from_proto(cls, rule: Any) -> AclRule:
        """Build from a ``raftlog.v1.AclRule``."""
        return cls(rule.subject, rule.topic_pattern, tuple(rule.permissions))


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """The cluster as one member (``node_id``) sees it. ``leader_id`` is "" when no leader
    is known. ``replication`` is "raft" or "master-slave"; in master-slave mode the leader is
    the master, ``term`` the master epoch, and the indexes are CommitLog offsets in bytes
    (``commit_index``: confirmed by the group; ``applied_index``: visible to readers)."""

    cluster_id: str
    node_id: str
    role: str
    leader_id: str
    leader_address: str
    term: int
    commit_index: int
    applied_index: int
    last_index: int
    members: tuple[Member, ...] = field(default=())
    transferring_to: str = ""
    replication: str = "raft"
    broker_name: str = ""
    broker_role: str = ""

    @classmethod
    def from_proto(cls, response: Any) -> ClusterStatus:
        """Build from a ``raftlog.v1.ClusterStatusResponse``."""
        return cls(
            cluster_id=response.cluster_id,
            node_id=response.node_id,
            role=ROLE_NAMES.get(response.role, "unknown"),
            leader_id=response.leader_id,
            leader_address=response.leader_address,
            term=response.term,
            commit_index=response.commit_index,
            applied_index=response.applied_index,
            last_index=response.last_index,
            members=tuple(Member.from_proto(m) for m in response.members),
            transferring_to=response.transferring_to,
            replication=response.replication or "raft",
            broker_name=response.broker_name,
            broker_role=response.broker_role,
        )


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    """The leader after a leadership transfer."""

    leader_id: str
    leader_address: str
    term: int
