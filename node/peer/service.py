"""RaftPeerService: the receiving end of the peer protocol (proto/raftlog/v1/peer.proto).

``Messages``: each incoming stream item is checked (cluster id, well-formed messages) and
handed to the replica's inbox; nothing is sent back on the stream (answers travel on this
node's own stream to the sender). A stream that ends (its sender's process ended, and the
kernel closed its connection) is reported as ``peer_gone(sender)``, so a follower need not
wait out an election timeout to replace a leader that died. ``FetchSegments``: a follower
installing a snapshot copies CommitLog bytes (node/peer/segment_source.py).

Rules this module keeps: a stream from another cluster, or with a malformed message, is ended
with INVALID_ARGUMENT, and one from a node that is not a current member (or that names
another sender than the stream's first message, or another target than this node) with
PERMISSION_DENIED; nothing of a refused item reaches the core, so a stranger cannot move the
term. Over mutual TLS the sender must also be a name of the caller's certificate
(node/security/tls.py), so a member cannot speak for another. A handler never blocks on the
Raft loop (the inbox is unbounded and cheap to fill).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

import grpc

from raftlog.node.peer.codec import decode_message
from raftlog.node.security.tls import certificate_names
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.raft.types import Message

_log = logging.getLogger(__name__)


class RaftPeerService(peer_pb2_grpc.RaftPeerServicer):
    def __init__(
        self,
        cluster_id: str,
        node_id: str,
        is_member: Callable[[str], bool],
        check_certificates: bool,
        deliver: Callable[[Sequence[Message]], None],
        peer_gone: Callable[[str], None],
        fetch_segments: Callable[
            [peer_pb2.FetchSegmentsRequest, grpc.ServicerContext], Iterator[peer_pb2.SegmentChunk]
        ],
    ) -> None:
        self._cluster_id = cluster_id
        self._node_id = node_id
        self._is_member = is_member
        self._check_certificates = check_certificates
        self._deliver = deliver
        self._peer_gone = peer_gone
        self._fetch_segments = fetch_segments

    def _check_cluster(self, cluster_id: str, context: grpc.ServicerContext) -> None:
        if cluster_id != self._cluster_id:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"cluster id {cluster_id!r} is not this node's {self._cluster_id!r}",
            )

    def _check_sender(
        self, sender: str, messages: Sequence[Message], context: grpc.ServicerContext
    ) -> None:
        """Every message comes from ``sender``, a current member, and is addressed here."""
        for message in messages:
            if message.source != sender or message.target != self._node_id:
                context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"a message from {message.source!r} to {message.target!r} on the stream "
                    f"of {sender!r} to {self._node_id!r}",
                )
        if not self._is_member(sender):
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED, f"{sender!r} is not a member of this cluster"
            )
        self._check_certificate(sender, context)

    def _check_certificate(self, node_id: str, context: grpc.ServicerContext) -> None:
        if self._check_certificates and node_id not in certificate_names(context):
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"the caller's certificate does not name {node_id!r}",
            )

    def Messages(
        self,
        request_iterator: Iterator[peer_pb2.RaftMessageBatch],
        context: grpc.ServicerContext,
    ) -> Iterator[peer_pb2.RaftMessageBatch]:
        sender: str | None = None
        try:
            for batch in request_iterator:
                self._check_cluster(batch.cluster_id, context)
                try:
                    messages = [decode_message(m) for m in batch.messages]
                except ValueError as error:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
                if messages:
                    claimed = sender or messages[0].source
                    self._check_sender(claimed, messages, context)
                    sender = claimed
                    self._deliver(messages)
        finally:
            # A sender's stream ends only with its process (a killed process's connection
            # may end as an error or as a clean close) or when it reconnects; either way a
            # follower need not trust it to lead any more. A live leader's next heartbeat,
            # on its new stream, restores it.
            if sender is not None:
                self._peer_gone(sender)
        yield from ()

    def FetchSegments(
        self, request: peer_pb2.FetchSegmentsRequest, context: grpc.ServicerContext
    ) -> Iterator[peer_pb2.SegmentChunk]:
        self._check_cluster(request.cluster_id, context)
        if not self._is_member(request.node_id):
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{request.node_id!r} is not a member of this cluster",
            )
        self._check_certificate(request.node_id, context)
        if request.from_physical_offset < 0:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"from_physical_offset must be >= 0, got {request.from_physical_offset}",
            )
        yield from self._fetch_segments(request, context)
