"""Operators' calls: topics, cluster status, leadership transfer, membership changes, access
rules, and message queries.

Rules this module keeps: writes (create_topic, transfer_leadership, membership changes) go to
the leader through redirects and are retried only when nothing was written (a refused
membership change, PreconditionFailedError, is not retried), except create_topic, which is
idempotent on the server (the same queue count again is a no-op) and so retried after an
unknown outcome too; reads may be answered by any member, or by the one named in ``address``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raftlog.client.connection import Connection
from raftlog.client.messages import (
    AclRule,
    ClusterStatus,
    LeaderInfo,
    Member,
    Message,
    TopicCreation,
    TopicDescription,
    TopicInfo,
)
from raftlog.client.retry import RetryPolicy
from raftlog.proto import client_pb2

# A leadership transfer waits for an election; give it more than a plain call.
DEFAULT_TRANSFER_TIMEOUT_S = 15.0


class Admin:
    """Administrative client for a raftlog cluster (``addresses``: "host:port" list or
    comma-separated string, or a shared Connection)."""

    def __init__(
        self, addresses: str | Sequence[str] | Connection, *, timeout_s: float = 10.0
    ) -> None:
        self._owns_connection = not isinstance(addresses, Connection)
        self._connection = addresses if isinstance(addresses, Connection) else Connection(addresses)
        self.timeout_s = timeout_s
        self._policy = RetryPolicy(total_timeout_s=timeout_s, attempt_timeout_s=timeout_s)

    @property
    def connection(self) -> Connection:
        """The connection these calls use."""
        return self._connection

    def _call(
        self,
        service: str,
        method: str,
        request: Any,
        *,
        leader_only: bool,
        write: bool,
        idempotent: bool,
        address: str | None = None,
        policy: RetryPolicy | None = None,
    ) -> Any:
        def attempt(timeout_s: float) -> Any:
            return self._connection.call(
                service,
                method,
                request,
                timeout_s=timeout_s,
                leader_only=leader_only,
                write=write,
                address=address,
            )

        return (policy or self._policy).run(attempt, idempotent=idempotent)

    def create_topic(self, topic: str, queue_count: int = 4) -> TopicCreation:
        """Create ``topic`` with ``queue_count`` queues, or grow it to that count."""
        response = self._call(
            "Admin",
            "CreateTopic",
            client_pb2.CreateTopicRequest(topic=topic, queue_count=queue_count),
            leader_only=True,
            write=True,
            idempotent=True,
        )
        return TopicCreation(topic=TopicInfo.from_proto(response.topic), created=response.created)

    def list_topics(self) -> list[TopicInfo]:
        """Every topic, sorted by name."""
        response = self._call(
            "Admin",
            "ListTopics",
            client_pb2.ListTopicsRequest(),
            leader_only=False,
            write=False,
            idempotent=True,
        )
        return [TopicInfo.from_proto(t) for t in response.topics]

    def describe_topic(self, topic: str, *, address: str | None = None) -> TopicDescription:
        """The topic's queues and their offsets, as ``address`` (default: any) sees them."""
        response = self._call(
            "Admin",
            "DescribeTopic",
            client_pb2.DescribeTopicRequest(topic=topic),
            leader_only=False,
            write=False,
            idempotent=True,
            address=address,
        )
        return TopicDescription.from_proto(response)

    def cluster_status(self, *, address: str | None = None) -> ClusterStatus:
        """The cluster as one member sees it: ``address``, else the believed leader, else any.
        Ask the leader for every follower's lag."""
        response = self._call(
            "Admin",
            "ClusterStatus",
            client_pb2.ClusterStatusRequest(),
            leader_only=False,
            write=False,
            idempotent=True,
            address=address,
        )
        status = ClusterStatus.from_proto(response)
        if status.leader_address:
            self._connection.note_leader(status.leader_address, status.term)
        return status

    def transfer_leadership(
        self, target_id: str = "", *, timeout_s: float = DEFAULT_TRANSFER_TIMEOUT_S
    ) -> LeaderInfo:
        """Hand leadership to ``target_id`` ("" = the most up-to-date voter); returns the new
        leader. UnknownOutcomeError: it did not finish in time (it may still)."""
        response = self._call(
            "Admin",
            "TransferLeadership",
            client_pb2.TransferLeadershipRequest(target_id=target_id),
            leader_only=True,
            write=True,
            idempotent=False,
            policy=RetryPolicy(total_timeout_s=timeout_s, attempt_timeout_s=timeout_s),
        )
        self._connection.note_leader(response.leader_address or None, response.term)
        return LeaderInfo(
            leader_id=response.leader_id,
            leader_address=response.leader_address,
            term=response.term,
        )

    # --- membership (Raft mode; one change at a time) ----------------------------------------

    def list_members(self, *, address: str | None = None) -> list[Member]:
        """Every member's id, address and role ("leader", "follower" or "learner"; ``voter``),
        as ``address`` (default: the believed leader, else any member) applied them."""
        response = self._call(
            "Admin",
            "ListMembers",
            client_pb2.ListMembersRequest(),
            leader_only=False,
            write=False,
            idempotent=True,
            address=address,
        )
        return [Member.from_proto(m) for m in response.members]

    def add_member(self, node_id: str, address: str, *, cluster_id: str = "") -> list[Member]:
        """Add ``node_id`` at ``address`` ("host:port") as a learner; returns the membership.
        PreconditionFailedError: already a member, address in use, another change pending, or
        (with ``cluster_id``) another cluster."""
        request = client_pb2.AddMemberRequest(
            node_id=node_id, address=address, cluster_id=cluster_id
        )
        return self._change("AddMember", request, self.timeout_s)

    def promote_member(self, node_id: str) -> list[Member]:
        """Make the learner ``node_id`` a voter. PreconditionFailedError: it has not caught up
        (the message says how far behind it is), or it is already a voter."""
        request = client_pb2.PromoteMemberRequest(node_id=node_id)
        return self._change("PromoteMember", request, self.timeout_s)

    def remove_member(
        self, node_id: str, *, timeout_s: float = DEFAULT_TRANSFER_TIMEOUT_S
    ) -> list[Member]:
        """Remove ``node_id`` (the leader hands leadership over first). PreconditionFailedError:
        the remaining voters would have no live quorum, or another change is pending."""
        request = client_pb2.RemoveMemberRequest(node_id=node_id)
        return self._change("RemoveMember", request, timeout_s)

    def _change(self, method: str, request: Any, timeout_s: float) -> list[Member]:
        response = self._call(
            "Admin",
            method,
            request,
            leader_only=True,
            write=True,
            idempotent=False,
            policy=RetryPolicy(total_timeout_s=timeout_s, attempt_timeout_s=timeout_s),
        )
        return [Member.from_proto(m) for m in response.members]

    def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        begin_timestamp_ms: int = 0,
        end_timestamp_ms: int = 0,
        max_messages: int = 0,
    ) -> list[Message]:
        """Messages whose KEYS hold ``key`` or whose UNIQ_KEY is ``key``, newest first, in a
        store-time window (0 = unbounded); ``max_messages`` 0 = the server's default."""
        response = self._call(
            "Consumer",
            "QueryByKey",
            client_pb2.QueryByKeyRequest(
                topic=topic,
                key=key,
                begin_timestamp_ms=begin_timestamp_ms,
                end_timestamp_ms=end_timestamp_ms,
                max_messages=max_messages,
            ),
            leader_only=False,
            write=False,
            idempotent=True,
        )
        return [Message.from_proto(m) for m in response.messages]

    def query_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset of ``queue_id`` stored at or after ``timestamp_ms``."""
        response = self._call(
            "Consumer",
            "QueryOffsetByTime",
            client_pb2.QueryOffsetByTimeRequest(
                topic=topic, queue_id=queue_id, timestamp_ms=timestamp_ms
            ),
            leader_only=False,
            write=False,
            idempotent=True,
        )
        return int(response.queue_offset)

    def query_by_id(self, msg_id: str) -> Message:
        """The message an offset message id (32 hex digits) names."""
        response = self._call(
            "Consumer",
            "QueryByMessageId",
            client_pb2.QueryByMessageIdRequest(msg_id=msg_id),
            leader_only=False,
            write=False,
            idempotent=True,
        )
        return Message.from_proto(response.message)

    def grant_acl(
        self, subject: str, topic_pattern: str, permissions: Sequence[str]
    ) -> list[AclRule]:
        """Let ``subject`` (a client name, or "*") do ``permissions`` ("produce", "consume",
        "admin", "all") on ``topic_pattern``; returns the subject's rules."""
        return self._change_acl(subject, topic_pattern, permissions, revoke=False)

    def revoke_acl(
        self, subject: str, topic_pattern: str, permissions: Sequence[str] = ()
    ) -> list[AclRule]:
        """Take ``permissions`` (none named: all) on ``topic_pattern`` from ``subject``;
        returns the subject's rules."""
        return self._change_acl(subject, topic_pattern, permissions, revoke=True)

    def _change_acl(
        self, subject: str, topic_pattern: str, permissions: Sequence[str], *, revoke: bool
    ) -> list[AclRule]:
        request = client_pb2.ChangeAclRequest(
            subject=subject, topic_pattern=topic_pattern, permissions=permissions, revoke=revoke
        )
        # Granting and revoking are idempotent on the server: safe to retry after an unknown
        # outcome.
        response = self._call(
            "AccessControl", "ChangeAcl", request, leader_only=True, write=True, idempotent=True
        )
        return [AclRule.from_proto(rule) for rule in response.rules]

    def list_acls(self, subject: str | None = None, *, address: str | None = None) -> list[AclRule]:
        """Every access rule (or ``subject``'s), sorted, as ``address`` (default: the believed
        leader, else any member) applied them."""
        response = self._call(
            "AccessControl",
            "ListAcls",
            client_pb2.ListAclsRequest(subject=subject or ""),
            leader_only=False,
            write=False,
            idempotent=True,
            address=address,
        )
        return [AclRule.from_proto(rule) for rule in response.rules]

    def close(self) -> None:
        """Close the connection (if this Admin opened it)."""
        if self._owns_connection:
            self._connection.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
