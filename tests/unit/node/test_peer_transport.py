"""PeerTransport.close ends within its timeout when a peer never ends its stream (a frozen
process, a hung handler): it cancels each sender's stream instead of waiting for the peer.
Before, it waited its whole timeout (2 s by default) for every such sender, in turn. And a
batch too large for one stream item is cut into several, not refused by gRPC."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from raftlog.node.peer.dialer import PeerDialer
from raftlog.node.peer.transport import PeerTransport, cut_stream_item
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.raft.types import Entry, Message, MessageType

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


class _RecordingPeer(peer_pb2_grpc.RaftPeerServicer):  # type: ignore[misc]
    """Records every message of every stream, in arrival order."""

    def __init__(self) -> None:
        self.messages: list[peer_pb2.RaftMessage] = []
        self.items = 0
        self.arrived = threading.Condition()

    def Messages(
        self, request_iterator: Iterator[peer_pb2.RaftMessageBatch], context: grpc.ServicerContext
    ) -> Iterator[peer_pb2.RaftMessageBatch]:
        for batch in request_iterator:
            with self.arrived:
                self.messages.extend(batch.messages)
                self.items += 1
                self.arrived.notify_all()
        return iter(())


def test_a_batch_larger_than_a_stream_item_is_cut_not_refused() -> None:
    """A leader catching a follower up hands the transport hundreds of 1 MiB APPENDs at once.
    As one stream item that passed gRPC's message limit (RESOURCE_EXHAUSTED), the stream
    broke, and the follower gained a few entries per reconnect. Here the receiver takes at
    most 8 MiB per message and gets 12 MiB in one batch: every APPEND arrives, in order, in
    items of at most 4 MiB, and the stream never breaks."""
    servicer = _RecordingPeer()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_receive_message_length", 8 << 20)],
    )
    peer_pb2_grpc.add_RaftPeerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    unreachable: list[str] = []
    transport = PeerTransport(
        "c", {"n2": "127.0.0.1:1"}, unreachable.append, PeerDialer({"n2": f"127.0.0.1:{port}"})
    )
    data = b"x" * (1 << 20)
    appends = [
        Message(
            MessageType.APPEND, "n1", "n2", 1, log_index=i, entries=(Entry(i + 1, 1, data=data),)
        )
        for i in range(12)
    ]
    try:
        transport.send(appends)
        deadline = time.monotonic() + 20
        with servicer.arrived:
            while len(servicer.messages) < len(appends) and time.monotonic() < deadline:
                servicer.arrived.wait(0.5)
        assert [m.log_index for m in servicer.messages] == list(range(12))
        assert servicer.items >= 3  # 12 MiB in items of at most 4 MiB
        assert unreachable == []
    finally:
        transport.close(timeout_s=5.0)
        server.stop(0).wait()


def test_cut_stream_item_keeps_order_and_sends_an_oversized_message_alone() -> None:
    big = Message(MessageType.APPEND, "n1", "n2", 1, entries=(Entry(1, 1, data=b"x" * 5000),))
    small = [Message(MessageType.HEARTBEAT, "n1", "n2", 1, commit=i) for i in range(3)]
    assert cut_stream_item([big, *small], max_bytes=1000) == ([big], small)
    assert cut_stream_item(small, max_bytes=1000) == (small, [])
    assert cut_stream_item([*small, big], max_bytes=1000) == (small, [big])
