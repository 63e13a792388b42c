"""The Admin gRPC service: topics, cluster status, leadership transfer, membership changes.

Rules this module keeps:
- CreateTopic and TransferLeadership go through the WritePath (leader only, replicated);
  ListTopics, DescribeTopic and ClusterStatus answer from this member's own state. A member
  behind the leader does not omit a topic acknowledged before the call: ListTopics passes
  the read barrier first, DescribeTopic before answering NOT_FOUND (fresh_read.py), each at
  most 1 s; ClusterStatus never waits on the network.
- CreateTopic checks what it can before the write path (name, reserved prefix, 1 <= queue_count
  <= ``max_topic_queue_count``, room for a new topic under ``max_topic_count``); a count
  below the current one is refused by the topic table, and in this RPC the store's
  InvalidQueueIdError always means a bad count: INVALID_ARGUMENT.
- TransferLeadership to the node itself, while it leads, is INVALID_ARGUMENT (client.proto),
  not a no-op answered OK.
- ClusterStatus lists voters then learners, each sorted by node id (client.proto), whatever
  order the write path gives; only the answering node's own entry carries a metrics URL (it
  knows no other member's).
- Membership RPCs go through the node's ``Membership`` (Raft mode only; a node without one
  refuses them with FAILED_PRECONDITION); their answers list voters then learners.
- Every error becomes a status through ``status_codes.abort_on_error``.
"""

from __future__ import annotations

import grpc

from raftlog.node.errors import InvalidRequestError, MembershipRefusedError
from raftlog.node.membership import MemberEntry, Membership, MembershipView
from raftlog.node.messaging.retry import is_node_topic
from raftlog.node.services.fresh_read import catch_up, read_fresh
from raftlog.node.services.limits import (
    LimitReachedError,
    ServiceLimits,
    require_within,
    timeout_for_call,
)
from raftlog.node.services.status_codes import READ_OVERRIDES, ErrorCodes, abort_on_error
from raftlog.node.services.wire import require_client_topic, require_topic_name
from raftlog.node.write_path import ClusterView, MemberView, WritePath
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.store.errors import InvalidQueueIdError
from raftlog.store.message_store import MessageStore
from raftlog.store.topic_config import TopicConfig

Code = grpc.StatusCode
MemberRole = client_pb2.MemberRole
ReplicationState = client_pb2.ReplicationState

_CREATE_TOPIC_OVERRIDES: ErrorCodes = {InvalidQueueIdError: Code.INVALID_ARGUMENT}
# WritePath role / replication-state names (write_path.MemberView) -> the API's enums.
_ROLES = {
    "leader": MemberRole.MEMBER_ROLE_LEADER,
    "follower": MemberRole.MEMBER_ROLE_FOLLOWER,
    "pre-candidate": MemberRole.MEMBER_ROLE_PRE_CANDIDATE,
    "candidate": MemberRole.MEMBER_ROLE_CANDIDATE,
    "learner": MemberRole.MEMBER_ROLE_LEARNER,
    "unknown": MemberRole.MEMBER_ROLE_UNKNOWN,
}
_REPLICATION_STATES = {
    "probe": ReplicationState.REPLICATION_STATE_PROBE,
    "replicate": ReplicationState.REPLICATION_STATE_REPLICATE,
    "snapshot": ReplicationState.REPLICATION_STATE_SNAPSHOT,
}


class AdminService(client_pb2_grpc.AdminServicer):
    def __init__(
        self,
        store: MessageStore,
        write_path: WritePath,
        limits: ServiceLimits,
        membership: Membership | None = None,
        metrics_url: str = "",
    ) -> None:
        self._store = store
        self._write_path = write_path
        self._limits = limits
        self._membership = membership
        self._metrics_url = metrics_url

    def CreateTopic(
        self, request: client_pb2.CreateTopicRequest, context: grpc.ServicerContext
    ) -> client_pb2.CreateTopicResponse:
        with abort_on_error(context, overrides=_CREATE_TOPIC_OVERRIDES):
            require_client_topic(request.topic, self._limits.message_limits)
            if request.queue_count < 1:
                raise InvalidRequestError(
                    f"queue_count must be at least 1, got {request.queue_count}"
                )
            require_within(
                request.queue_count,
                self._limits.max_topic_queue_count,
                "max_topic_queue_count",
                "queue_count",
            )
            self._require_room_for(request.topic)
            config, created = self._write_path.create_topic(
                request.topic,
                request.queue_count,
                timeout_s=timeout_for_call(
                    context.time_remaining(), self._limits.max_write_timeout_s
                ),
            )
            return client_pb2.CreateTopicResponse(topic=_topic_info(config), created=created)

    def _require_room_for(self, topic: str) -> None:
        """A new topic needs room in the topic table (this member's applied state: the leader's
        when it is the leader, which is where the write goes)."""
        names = {config.name for config in self._store.list_topics()}
        if topic in names:
            return
        user_topics = sum(1 for name in names if not is_node_topic(name))
        if user_topics >= self._limits.max_topic_count:
            raise LimitReachedError(
                f"the cluster has {user_topics} topics; the limit is "
                f"{self._limits.max_topic_count} (max_topic_count)"
            )

    def ListTopics(
        self, request: client_pb2.ListTopicsRequest, context: grpc.ServicerContext
    ) -> client_pb2.ListTopicsResponse:
        with abort_on_error(context):
            catch_up(self._write_path, context)  # a list cannot name what it lacks
            return client_pb2.ListTopicsResponse(
                topics=[_topic_info(config) for config in self._store.list_topics()]
            )

    def DescribeTopic(
        self, request: client_pb2.DescribeTopicRequest, context: grpc.ServicerContext
    ) -> client_pb2.DescribeTopicResponse:
        with abort_on_error(context, overrides=READ_OVERRIDES):
            require_topic_name(request.topic, self._limits.message_limits)
            return read_fresh(self._write_path, context, lambda: self._describe(request.topic))

    def _describe(self, topic: str) -> client_pb2.DescribeTopicResponse:
        config = self._store.describe_topic(topic)
        return client_pb2.DescribeTopicResponse(
            topic=_topic_info(config),
            queues=[
                self._queue_info(config.name, queue_id) for queue_id in range(config.queue_count)
            ],
        )

    def _queue_info(self, topic: str, queue_id: int) -> client_pb2.QueueInfo:
        store = self._store
        min_queue_offset = store.min_queue_offset(topic, queue_id)
        max_queue_offset = store.max_queue_offset(topic, queue_id)
        last_store_timestamp_ms = 0
        if max_queue_offset > min_queue_offset:
            newest = store.get_messages(topic, queue_id, max_queue_offset - 1, max_messages=1)
            if newest.messages:
                last_store_timestamp_ms = newest.messages[-1].store_timestamp_ms
        return client_pb2.QueueInfo(
            queue_id=queue_id,
            min_queue_offset=min_queue_offset,
            max_queue_offset=max_queue_offset,
            last_store_timestamp_ms=last_store_timestamp_ms,
        )

    def ClusterStatus(
        self, request: client_pb2.ClusterStatusRequest, context: grpc.ServicerContext
    ) -> client_pb2.ClusterStatusResponse:
        with abort_on_error(context):
            return cluster_status(self._write_path.cluster_view(), self._metrics_url)

    def TransferLeadership(
        self, request: client_pb2.TransferLeadershipRequest, context: grpc.ServicerContext
    ) -> client_pb2.TransferLeadershipResponse:
        with abort_on_error(context):
            target_id = request.target_id or None
            here = self._write_path.cluster_view()
            if target_id == here.node_id and here.role == "leader":
                # client.proto: a target that is this node is INVALID_ARGUMENT (on a member
                # that does not lead, the write path answers "not leader" first).
                raise InvalidRequestError(
                    f"target_id {target_id!r} is this node, which already leads; name another "
                    "voter, or leave target_id empty for the most up-to-date one"
                )
            view = self._write_path.transfer_leadership(
                target_id,
                timeout_s=timeout_for_call(
                    context.time_remaining(), self._limits.max_transfer_timeout_s
                ),
            )
            return client_pb2.TransferLeadershipResponse(
                leader_id=view.leader_id or "",
                leader_address=view.leader_address or "",
                term=view.term,
            )

    # --- membership ------------------------------------------------------------------------

    def _require_membership(self) -> Membership:
        if self._membership is None:
            raise MembershipRefusedError(
                "membership changes need replication = raft; this node runs master-slave"
            )
        return self._membership

    def _change_timeout_s(self, context: grpc.ServicerContext, limit_s: float) -> float:
        return timeout_for_call(context.time_remaining(), limit_s)

    def ListMembers(
        self, request: client_pb2.ListMembersRequest, context: grpc.ServicerContext
    ) -> client_pb2.ListMembersResponse:
        with abort_on_error(context):
            view = self._require_membership().members()
            return client_pb2.ListMembersResponse(
                cluster_id=view.cluster_id,
                members=_members(view),
                leader_id=view.leader_id or "",
                leader_address=view.leader_address or "",
            )

    def AddMember(
        self, request: client_pb2.AddMemberRequest, context: grpc.ServicerContext
    ) -> client_pb2.MembershipChangeResponse:
        with abort_on_error(context):
            view = self._require_membership().add_learner(
                request.node_id,
                request.address,
                request.cluster_id,
                timeout_s=self._change_timeout_s(context, self._limits.max_write_timeout_s),
            )
            return client_pb2.MembershipChangeResponse(members=_members(view))

    def PromoteMember(
        self, request: client_pb2.PromoteMemberRequest, context: grpc.ServicerContext
    ) -> client_pb2.MembershipChangeResponse:
        with abort_on_error(context):
            view = self._require_membership().promote(
                request.node_id,
                timeout_s=self._change_timeout_s(context, self._limits.max_write_timeout_s),
            )
            return client_pb2.MembershipChangeResponse(members=_members(view))

    def RemoveMember(
        self, request: client_pb2.RemoveMemberRequest, context: grpc.ServicerContext
    ) -> client_pb2.MembershipChangeResponse:
        with abort_on_error(context):
            # Removing the leader transfers leadership first: allow the transfer's time.
            view = self._require_membership().remove(
                request.node_id,
                timeout_s=self._change_timeout_s(context, self._limits.max_transfer_timeout_s),
            )
            return client_pb2.MembershipChangeResponse(members=_members(view))


def _members(view: MembershipView) -> list[client_pb2.Member]:
    return [_membership_entry(entry, view.leader_id) for entry in view.members]


def _membership_entry(entry: MemberEntry, leader_id: str | None) -> client_pb2.Member:
    if not entry.voter:
        role = MemberRole.MEMBER_ROLE_LEARNER
    elif entry.node_id == leader_id:
        role = MemberRole.MEMBER_ROLE_LEADER
    else:
        role = MemberRole.MEMBER_ROLE_FOLLOWER
    return client_pb2.Member(
        node_id=entry.node_id, address=entry.address, role=role, voter=entry.voter
    )


def cluster_status(view: ClusterView, metrics_url: str = "") -> client_pb2.ClusterStatusResponse:
    """The API's ClusterStatusResponse for a WritePath ClusterView; ``metrics_url`` is the
    answering node's Prometheus endpoint ("" = none)."""
    members = sorted(view.members, key=lambda member: (not member.voter, member.node_id))
    return client_pb2.ClusterStatusResponse(
        cluster_id=view.cluster_id,
        node_id=view.node_id,
        role=_role(view.role),
        leader_id=view.leader_id or "",
        leader_address=view.leader_address or "",
        term=view.term,
        commit_index=view.commit_index,
        applied_index=view.applied_index,
        last_index=view.last_index,
        members=[
            _member(member, metrics_url if member.node_id == view.node_id else "")
            for member in members
        ],
        transferring_to=view.transferring_to or "",
        replication=view.replication,
        broker_name=view.broker_name,
        broker_role=view.broker_role,
    )


def _member(member: MemberView, metrics_url: str) -> client_pb2.Member:
    return client_pb2.Member(
        node_id=member.node_id,
        address=member.address,
        role=_role(member.role),
        voter=member.voter,
        has_progress=member.has_progress,
        match_index=member.match_index,
        lag_entries=member.lag_entries,
        replication_state=_REPLICATION_STATES.get(
            member.replication_state, ReplicationState.REPLICATION_STATE_UNSPECIFIED
        ),
        inflight_appends=member.inflight_appends,
        recent_active=member.recent_active,
        lag_bytes=member.lag_bytes,
        lag_ms=member.lag_ms,
        in_sync=member.in_sync,
        metrics_url=metrics_url,
    )


def _role(role: str) -> client_pb2.MemberRole:
    # A role name this mapping does not know is reported as unknown, not as an error.
    return _ROLES.get(role, MemberRole.MEMBER_ROLE_UNKNOWN)


def _topic_info(config: TopicConfig) -> client_pb2.TopicInfo:
    return client_pb2.TopicInfo(name=config.name, queue_count=config.queue_count)
