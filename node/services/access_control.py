"""The AccessControl gRPC service: change and list the access rules (client.proto).

Rules this module keeps:
- ChangeAcl validates the subject, pattern and permissions (node/security/access.py) before
  anything is written, then goes through the WritePath (leader or master only; replicated like
  a topic), and answers the subject's rules as this node applied them.
- ListAcls answers from this member's applied rules and never waits on the network.
- Who may call either is the AclCheck interceptor's business (admin on ``*``), not this one's.
- Every error becomes a status through ``status_codes.abort_on_error``.
"""

from __future__ import annotations

import grpc

from raftlog.node.control import ChangeAccess
from raftlog.node.security.access import check_pattern, check_subject, parse_permissions
from raftlog.node.services.limits import ServiceLimits, timeout_for_call
from raftlog.node.services.status_codes import abort_on_error
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.store.access_rules import AccessRules


class AccessControlService(client_pb2_grpc.AccessControlServicer):
    def __init__(self, rules: AccessRules, write_path: WritePath, limits: ServiceLimits) -> None:
        self._rules = rules
        self._write_path = write_path
        self._limits = limits

    def ChangeAcl(
        self, request: client_pb2.ChangeAclRequest, context: grpc.ServicerContext
    ) -> client_pb2.ChangeAclResponse:
        with abort_on_error(context):
            change = ChangeAccess(
                check_subject(request.subject),
                check_pattern(request.topic_pattern),
                parse_permissions(request.permissions, allow_none=request.revoke),
                request.revoke,
            )
            self._write_path.change_access(
                change,
                timeout_s=timeout_for_call(
                    context.time_remaining(), self._limits.max_write_timeout_s
                ),
            )
            return client_pb2.ChangeAclResponse(rules=self._rules_of(change.subject))

    def ListAcls(
        self, request: client_pb2.ListAclsRequest, context: grpc.ServicerContext
    ) -> client_pb2.ListAclsResponse:
        with abort_on_error(context):
            subject = check_subject(request.subject) if request.subject else None
            return client_pb2.ListAclsResponse(rules=self._rules_of(subject))

    def _rules_of(self, subject: str | None) -> list[client_pb2.AclRule]:
        _, rules = self._rules.snapshot()
        return [
            client_pb2.AclRule(subject=s, topic_pattern=p, permissions=sorted(permissions))
            for (s, p), permissions in sorted(rules.items())
            if subject is None or s == subject
        ]
