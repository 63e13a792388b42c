"""raftlog.client: a typed Python client for a raftlog cluster (gRPC, generated stubs only).

``Producer`` sends (idempotent and in order by default), ``Consumer`` reads a topic for a
consumer group with long polling (``tags`` filters, ``broadcast=True`` gives every member
every message; ``reconsume_later`` sends one back to the group's retry topic),
``PushConsumer`` calls a listener on a thread pool; ``Producer.send_in_transaction`` sends a
transactional message (``TransactionState`` is what its callbacks answer); ``Admin`` manages
topics and the cluster and queries messages. Every failure is a ``RaftlogError`` subclass;
``UnknownOutcomeError`` means a write may or may not be stored, never that it failed. This
package imports only raftlog.proto and third-party packages (import-linter contract).
"""

from raftlog.client.admin import Admin
from raftlog.client.connection import Connection, parse_addresses
from raftlog.client.consumer import Consumer
from raftlog.client.errors import (
    DeadlineExceededError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    NotLeaderError,
    PermissionDeniedError,
    PreconditionFailedError,
    RaftlogError,
    ResourceExhaustedError,
    SequenceForgottenError,
    SequenceGapError,
    UnauthenticatedError,
    UnavailableError,
    UnknownOutcomeError,
    from_rpc_error,
)
from raftlog.client.messages import (
    AclRule,
    ClusterStatus,
    LeaderInfo,
    Member,
    Message,
    OutgoingMessage,
    QueueInfo,
    SendResult,
    TopicCreation,
    TopicDescription,
    TopicInfo,
)
from raftlog.client.producer import Producer
from raftlog.client.push_consumer import ConsumeResult, PushConsumer
from raftlog.client.retry import RetryPolicy
from raftlog.client.send_back import SendBackResult
from raftlog.client.tag_filter import TagFilter
from raftlog.client.tls import ClientTls
from raftlog.client.transaction import TransactionSendResult, TransactionState

__all__ = [
    "AclRule",
    "Admin",
    "ClientTls",
    "ClusterStatus",
    "Connection",
    "ConsumeResult",
    "Consumer",
    "DeadlineExceededError",
    "InternalError",
    "InvalidArgumentError",
    "LeaderInfo",
    "Member",
    "Message",
    "NotFoundError",
    "NotLeaderError",
    "OutgoingMessage",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "Producer",
    "PushConsumer",
    "QueueInfo",
    "RaftlogError",
    "ResourceExhaustedError",
    "RetryPolicy",
    "SendBackResult",
    "SendResult",
    "SequenceForgottenError",
    "SequenceGapError",
    "TagFilter",
    "TopicCreation",
    "TopicDescription",
    "TopicInfo",
    "TransactionSendResult",
    "TransactionState",
    "UnauthenticatedError",
    "UnavailableError",
    "UnknownOutcomeError",
    "from_rpc_error",
    "parse_addresses",
]
