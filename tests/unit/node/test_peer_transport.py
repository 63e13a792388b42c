"""PeerTransport.close ends within its timeout when a peer never ends its stream (a frozen
process, a hung handler): it cancels each sender's stream instead of waiting for the peer.
Before, it waited its whole timeout (2 s by default) for every such sender, in turn."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from raftlog.node.peer.dialer import PeerDialer
from raftlog.node.peer.transport import PeerTransport
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.raft.types import Message, MessageType

CLOSE_WITHIN_S = 1.0


class _HungPeer(peer_pb2_grpc.RaftPeerServicer):  # type: ignore[misc]
    """Takes one batch, then never answers nor ends the stream until released."""

    def __init__(self) -> None:
        self.received = threading.Event()
        self.release = threading.Event()

    def Messages(
        self, request_iterator: Iterator[peer_pb2.RaftMessageBatch], context: grpc.ServicerContext
    ) -> Iterator[peer_pb2.RaftMessageBatch]:
        next(request_iterator)
        self.received.set()
        self.release.wait(30)
        return iter(())


@pytest.fixture
def hung_peer() -> Iterator[tuple[_HungPeer, int]]:
    servicer = _HungPeer()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    peer_pb2_grpc.add_RaftPeerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, port
    finally:
        servicer.release.set()
        server.stop(0).wait()


def test_close_cancels_a_stream_the_peer_never_ends(hung_peer: tuple[_HungPeer, int]) -> None:
    servicer, port = hung_peer
    dialer = PeerDialer({"n2": f"127.0.0.1:{port}"})
    transport = PeerTransport("c", {"n2": "127.0.0.1:1"}, lambda peer_id: None, dialer)
    transport.send([Message(MessageType.HEARTBEAT, "n1", "n2", 1)])
    assert servicer.received.wait(10), "the peer never got the batch"
    started = time.monotonic()
    transport.close(timeout_s=5.0)
    assert time.monotonic() - started < CLOSE_WITHIN_S
