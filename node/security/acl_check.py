"""AclCheck: the client port's interceptor that enforces access rules (``acl_enable``).

Each raftlog method needs one permission on the topics its request names (access.py says what
they mean):

| methods | needs |
|---|---|
| Producer.Produce | produce on the request's topic |
| Producer.EndTransaction | produce on the request's topic (the half message's real topic) |
| Producer.TransactionChecks (a stream) | produce on every topic named |
| Consumer.Pull, QueryByKey, QueryOffsetByTime | consume on the request's topic |
| Consumer.CommitOffsets, FetchOffsets | consume on every topic named |
| Consumer.SendBack | consume on the topic the message was pulled from |
| Consumer.Heartbeat | consume on every topic named |
| Consumer.LockQueues, UnlockQueues | consume on the request's topic |
| Consumer.QueryByMessageId | consume on the found message's topic (checked on the answer) |
| Admin.CreateTopic | admin on the topic |
| Admin.ListTopics, DescribeTopic, ClusterStatus, ListMembers | any authenticated client |
| every other raftlog method (leadership, membership, AccessControl) | admin on ``*`` |

Health and reflection stay open, as the token check leaves them.

Rules this module keeps:
- The caller is the client its bearer token names (tokens.py) or, without a token, the common
  name of its verified client certificate; a call from neither is UNAUTHENTICATED. A refused
  call is PERMISSION_DENIED naming the client, the permission and the topic, before the
  service sees it (nothing is written, no term moves).
- It runs inside RequestGuard (after it in the server's interceptors), so it only ever sees
  requests that parsed.
- A raftlog method this table does not name needs admin on ``*``: a new method is closed
  until someone decides otherwise. Unary methods and server-streaming ones (checked before
  the stream starts) are wrapped alike.
- The leader decides the calls only it serves: a member that is not the leader passes a call
  it would refuse on to the service, which answers "not leader" without writing, so a grant
  the leader has applied is never refused by a follower that lags behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import grpc

from raftlog.node.security.access import ADMIN, CONSUME, PRODUCE, AccessPolicy
from raftlog.node.services.handler_wrapper import HandlerWrapper

_API_PREFIX = "/raftlog.v1."
_BEARER = "bearer "
TopicsOf = Callable[[Any], Iterable[str]]


def _one(request: Any) -> Iterable[str]:
    return (request.topic,)


_BEFORE: dict[str, tuple[str, TopicsOf]] = {
    "Producer/Produce": (PRODUCE, _one),
    "Producer/EndTransaction": (PRODUCE, _one),
    "Producer/TransactionChecks": (PRODUCE, lambda r: set(r.topics)),
    "Consumer/Pull": (CONSUME, _one),
    "Consumer/QueryByKey": (CONSUME, _one),
    "Consumer/QueryOffsetByTime": (CONSUME, _one),
    "Consumer/CommitOffsets": (CONSUME, lambda r: {o.topic for o in r.offsets}),
    "Consumer/FetchOffsets": (CONSUME, lambda r: {q.topic for q in r.queues}),
    "Consumer/SendBack": (CONSUME, _one),
    "Consumer/Heartbeat": (CONSUME, lambda r: set(r.topics)),
    "Consumer/LockQueues": (CONSUME, _one),
    "Consumer/UnlockQueues": (CONSUME, _one),
    "Admin/CreateTopic": (ADMIN, _one),
}
_OPEN = frozenset(
    {"Admin/ListTopics", "Admin/DescribeTopic", "Admin/ClusterStatus", "Admin/ListMembers"}
)
_ANSWER_CHECKED = "Consumer/QueryByMessageId"
# Served by the leader only (elsewhere they answer "not leader" and write nothing): a member
# that is not the leader may not have applied the latest rules yet, so it lets them through to
# that answer and the leader decides.
_LEADER_SERVED = frozenset(
    {
        "Producer/Produce",
        "Producer/EndTransaction",
        "Producer/TransactionChecks",
        "Consumer/CommitOffsets",
        "Consumer/SendBack",
        "Consumer/Heartbeat",
        "Consumer/LockQueues",
        "Consumer/UnlockQueues",
        "Admin/CreateTopic",
        "Admin/TransferLeadership",
        "Admin/AddMember",
        "Admin/PromoteMember",
        "Admin/RemoveMember",
        "AccessControl/ChangeAcl",
    }
)


def caller_of(
    context: grpc.ServicerContext, client_of_token: Callable[[str], str | None] | None
) -> str | None:
    """The client making this call: its token's name, else its certificate's common name."""
    if client_of_token is not None:
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and str(value)[: len(_BEARER)].lower() == _BEARER:
                name = client_of_token(str(value)[len(_BEARER) :])
                if name is not None:
                    return name
    names = context.auth_context().get("x509_common_name")
    if names:
        return bytes(names[0]).decode(errors="replace")
    return None


class AclCheck(HandlerWrapper):
    """Wraps each raftlog unary or server-streaming method with its permission check (see
    the module's table)."""

    def __init__(
        self,
        policy: AccessPolicy,
        client_of_token: Callable[[str], str | None] | None,
        is_leader: Callable[[], bool],
    ) -> None:
        super().__init__()
        self._policy = policy
        self._client_of_token = client_of_token
        self._is_leader = is_leader

    def wants(self, handler: grpc.RpcMethodHandler) -> bool:
        return handler.unary_unary is not None or handler.unary_stream is not None

    def wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if not method.startswith(_API_PREFIX):
            return handler
        name = method[len(_API_PREFIX) :]
        if name in _OPEN:
            return handler
        streaming = handler.unary_unary is None
        behavior = handler.unary_stream if streaming else handler.unary_unary
        permission, topics_of = _BEFORE.get(name, (ADMIN, lambda _request: (None,)))
        leader_served = name in _LEADER_SERVED

        def checked(request: Any, context: grpc.ServicerContext) -> Any:
            caller = self._caller(context)
            if name == _ANSWER_CHECKED:
                answer = behavior(request, context)
                if answer.HasField("message"):
                    self._require(context, caller, CONSUME, answer.message.topic)
                return answer
            denied = [
                topic
                for topic in topics_of(request)
                if not self._policy.allows(caller, permission, topic)
            ]
            if denied and not (leader_served and not self._is_leader()):
                self._deny(context, caller, permission, denied[0])
            return behavior(request, context)

        if streaming:
            return handler._replace(unary_stream=checked)
        return handler._replace(unary_unary=checked)

    def _caller(self, context: grpc.ServicerContext) -> str:
        caller = caller_of(context, self._client_of_token)
        if caller is None:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "this node enforces access rules and cannot tell who you are: send a bearer "
                "token or a client certificate",
            )
        assert caller is not None
        return caller

    def _require(
        self, context: grpc.ServicerContext, caller: str, permission: str, topic: str | None
    ) -> None:
        if not self._policy.allows(caller, permission, topic):
            self._deny(context, caller, permission, topic)

    def _deny(
        self, context: grpc.ServicerContext, caller: str, permission: str, topic: str | None
    ) -> None:
        what = f"topic {topic!r}" if topic is not None else "the cluster (that needs '*')"
        context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            f"client {caller!r} may not {permission} {what}: no access rule grants it "
            "(see `raftlog acl list`)",
        )
