"""The peer port apart (docs/security.md), on a cluster of real node processes:

- the client port does not serve RaftPeer (UNIMPLEMENTED), the peer port does;
- a Raft message from a node id that is not a member, from a member but addressed to another
  node, or of another cluster, is refused on the peer port, and the term does not move.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.client import Admin
from raftlog.node.peer.codec import encode_message
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.raft.types import Message, MessageType
from raftlog.testing.local_cluster import LocalCluster

_CALL_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base: Path = tmp_path_factory.mktemp("peer-port")
    running = LocalCluster(str(base / "data"), base_port=0)
    running.start(30.0)
    try:
        yield running
    finally:
        running.stop()


def _send(address: str, batch: peer_pb2.RaftMessageBatch) -> grpc.StatusCode:
    """Open a Messages stream to ``address``, send ``batch``, return how the stream ended."""
    with grpc.insecure_channel(address) as channel:
        stub = peer_pb2_grpc.RaftPeerStub(channel)  # type: ignore[no-untyped-call]
        try:
            for _ in stub.Messages(iter([batch]), timeout=_CALL_TIMEOUT_S):
                pass
        except grpc.RpcError as error:
            return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def _vote_request(
    source: str, target: str, term: int, cluster_id: str = "raftlog"
) -> peer_pb2.RaftMessageBatch:
    message = Message(MessageType.VOTE, source, target, term, log_term=10**6, log_index=10**9)
    return peer_pb2.RaftMessageBatch(cluster_id=cluster_id, messages=[encode_message(message)])


def _term(cluster: LocalCluster) -> int:
    with Admin(cluster.addresses) as admin:
        return admin.cluster_status().term


def test_client_port_does_not_serve_peer_methods(cluster: LocalCluster) -> None:
    n1 = cluster.nodes["n1"]
    batch = peer_pb2.RaftMessageBatch(cluster_id="raftlog")
    assert _send(n1.address, batch) is grpc.StatusCode.UNIMPLEMENTED
    with grpc.insecure_channel(n1.address) as channel:
        stub = peer_pb2_grpc.RaftPeerStub(channel)  # type: ignore[no-untyped-call]
        request = peer_pb2.FetchSegmentsRequest(cluster_id="raftlog", node_id="n2")
        with pytest.raises(grpc.RpcError) as raised:
            list(stub.FetchSegments(request, timeout=_CALL_TIMEOUT_S))
    assert raised.value.code() is grpc.StatusCode.UNIMPLEMENTED
    # The peer port serves it: an empty batch of this cluster is accepted.
    assert _send(n1.peer_address, batch) is grpc.StatusCode.OK


def test_strangers_are_refused_and_the_term_stays(cluster: LocalCluster) -> None:
    before = _term(cluster)
    n1 = cluster.nodes["n1"]
    huge_term = before + 1000
    assert _send(n1.peer_address, _vote_request("intruder", "n1", huge_term)) is (
        grpc.StatusCode.PERMISSION_DENIED
    )
    # A member's id, but addressed to another node than the one it reached.
    assert _send(n1.peer_address, _vote_request("n2", "n3", huge_term)) is (
        grpc.StatusCode.PERMISSION_DENIED
    )
    assert _send(n1.peer_address, _vote_request("n2", "n1", huge_term, "other")) is (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    with grpc.insecure_channel(n1.peer_address) as channel:
        stub = peer_pb2_grpc.RaftPeerStub(channel)  # type: ignore[no-untyped-call]
        request = peer_pb2.FetchSegmentsRequest(cluster_id="raftlog", node_id="intruder")
        with pytest.raises(grpc.RpcError) as raised:
            list(stub.FetchSegments(request, timeout=_CALL_TIMEOUT_S))
    assert raised.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert _term(cluster) == before
