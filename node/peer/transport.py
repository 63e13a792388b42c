"""PeerTransport: carries a node's outgoing Raft messages to its peers over gRPC.

One sender per peer owns one long-lived ``RaftPeer.Messages`` stream (peer.proto). The Raft
loop hands messages to ``send`` and never blocks on the network: each sender has a bounded
queue, and what does not fit is dropped (Raft tolerates loss; the core re-sends). When a
stream breaks, the queued messages are dropped, the core is told the peer is unreachable (so
it probes instead of pipelining into the void), and the sender reconnects with a capped,
jittered backoff.

Rules this module keeps: messages to one peer keep their order; the sender merges queued
batches into one stream item up to ``_MAX_STREAM_ITEM_BYTES`` (amortizing gRPC's per-item
cost under load) and cuts a larger batch into items of at most that size (a leader catching
a follower up hands over hundreds of 1 MiB APPENDs in one batch: as one item it passed gRPC's
message limit and broke the stream every time); keepalive pings detect a peer that stopped
answering (a paused process) within a few seconds; ``close`` stops every sender thread it
started, within its timeout even when a peer is frozen (it cancels each sender's stream rather
than waiting for the peer to end it); ``set_peers`` and ``send`` run on one thread (the Raft
loop), ``close`` after it stopped.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import grpc

from raftlog.node.peer.codec import encode_message
from raftlog.node.peer.dialer import PeerDialer
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.raft.types import Message

_log = logging.getLogger(__name__)

_MAX_QUEUED_BATCHES = 4096
_MAX_STREAM_ITEM_BYTES = 4 << 20
_RECONNECT_BACKOFF_MIN_S = 0.05
_RECONNECT_BACKOFF_MAX_S = 1.0
_QUEUE_POLL_S = 0.2
_RETIRE_AFTER_S = 2.0


def _message_size_bytes(message: Message) -> int:
    return 64 + sum(len(entry.data) + 32 for entry in message.entries)


def _approximate_size_bytes(messages: Sequence[Message]) -> int:
    return sum(_message_size_bytes(m) for m in messages)


def cut_stream_item(
    messages: list[Message], max_bytes: int = _MAX_STREAM_ITEM_BYTES
) -> tuple[list[Message], list[Message]]:
    """The first messages of ``messages`` that fit ``max_bytes`` (at least one), and the
    rest, in order."""
    size_bytes = 0
    for position, message in enumerate(messages):
        size_bytes += _message_size_bytes(message)
        if size_bytes > max_bytes and position > 0:
            return messages[:position], messages[position:]
    return messages, []


class _PeerSender:
    def __init__(
        self,
        peer_id: str,
        address: str,
        cluster_id: str,
        on_unreachable: Callable[[str], None],
        dialer: PeerDialer,
    ) -> None:
        self.peer_id = peer_id
        self._address = address
        self._dialer = dialer
        self._cluster_id = cluster_id
        self._on_unreachable = on_unreachable
        self._queue: queue.Queue[list[Message]] = queue.Queue(_MAX_QUEUED_BATCHES)
        self._closed = threading.Event()
        # The stream in progress: ``close`` cancels it (a frozen peer never ends it).
        self._call: grpc.Future | None = None
        self._thread = threading.Thread(target=self._run, name=f"raft-send-{peer_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def offer(self, messages: list[Message]) -> None:
        try:
            self._queue.put_nowait(messages)
        except queue.Full:
            # The peer is slow or gone; Raft re-sends what matters.
            self._on_unreachable(self.peer_id)

    def close(self) -> None:
        self._closed.set()
        call = self._call
        if call is not None:
            call.cancel()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the sender thread to end; whether it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _batches(self, stream_broken: threading.Event) -> Iterator[peer_pb2.RaftMessageBatch]:
        # Taken from the queue but not yet sent (what a cut left over), in order.
        pending: list[Message] = []
        try:
            while not self._closed.is_set() and not stream_broken.is_set():
                if not pending:
                    try:
                        pending = self._queue.get(timeout=_QUEUE_POLL_S)
                    except queue.Empty:
                        continue
                size_bytes = _approximate_size_bytes(pending)
                while size_bytes < _MAX_STREAM_ITEM_BYTES:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    pending = pending + more
                    size_bytes += _approximate_size_bytes(more)
                item, pending = cut_stream_item(pending)
                yield peer_pb2.RaftMessageBatch(
                    cluster_id=self._cluster_id, messages=[encode_message(m) for m in item]
                )
        finally:
            if pending:  # dropped with the stream; the core re-sends once told
                self._on_unreachable(self.peer_id)

    def _drain(self) -> None:
        dropped = 0
        while True:
            try:
                self._queue.get_nowait()
                dropped += 1
            except queue.Empty:
                break
        if dropped:
            self._on_unreachable(self.peer_id)

    def _run(self) -> None:
        backoff_s = _RECONNECT_BACKOFF_MIN_S
        rng = random.Random()
        while not self._closed.is_set():
            stream_broken = threading.Event()
            with self._dialer.channel(self.peer_id, self._address) as channel:
                stub = peer_pb2_grpc.RaftPeerStub(channel)  # type: ignore[no-untyped-call]
                call = self._call = stub.Messages(self._batches(stream_broken))
                if self._closed.is_set():
                    call.cancel()  # closed before the call was published
                try:
                    for _ in call:
                        # Peers answer on their own streams; anything here is ignored.
                        backoff_s = _RECONNECT_BACKOFF_MIN_S
                    backoff_s = _RECONNECT_BACKOFF_MIN_S
                except grpc.RpcError as error:
                    if error.code() is grpc.StatusCode.INVALID_ARGUMENT:
                        _log.error("peer %s refused our stream: %s", self.peer_id, error.details())
                    else:
                        _log.debug("stream to %s broke: %s", self.peer_id, error.code())
                finally:
                    stream_broken.set()
                    self._call = None
            self._drain()
            self._closed.wait(backoff_s * (0.5 + rng.random()))
            backoff_s = min(backoff_s * 2, _RECONNECT_BACKOFF_MAX_S)


class PeerTransport:
    """Non-blocking sends to every peer; ``on_unreachable(peer_id)`` is called from sender
    threads when messages to that peer were dropped. ``set_peers`` follows membership changes:
    new members get a sender, removed ones lose theirs, a moved one is dialled anew; each is
    dialled at its peer port, as ``dialer`` resolves it."""

    def __init__(
        self,
        cluster_id: str,
        peer_addresses: dict[str, str],
        on_unreachable: Callable[[str], None],
        dialer: PeerDialer,
    ) -> None:
        self._cluster_id = cluster_id
        self._on_unreachable = on_unreachable
        self._dialer = dialer
        self._senders: dict[str, _PeerSender] = {}
        self._addresses: dict[str, str] = {}
        self._retiring: list[tuple[float, _PeerSender]] = []
        self.set_peers(peer_addresses)

    def set_peers(self, client_addresses: dict[str, str]) -> None:
        """Dial exactly the members of ``client_addresses`` (id -> client host:port) from now
        on, at their peer ports. A removed peer's sender lingers ``_RETIRE_AFTER_S``, so the
        leader's farewell to it still leaves."""
        peer_addresses = self._dialer.all_of(client_addresses)
        now = time.monotonic()
        for peer_id in sorted(self._senders):
            address = self._addresses[peer_id]
            if address != peer_addresses.get(peer_id):
                self._retiring.append((now + _RETIRE_AFTER_S, self._senders.pop(peer_id)))
                del self._addresses[peer_id]
        for peer_id, address in sorted(peer_addresses.items()):
            if peer_id not in self._senders:
                sender = _PeerSender(
                    peer_id, address, self._cluster_id, self._on_unreachable, self._dialer
                )
                self._senders[peer_id] = sender
                self._addresses[peer_id] = address
                sender.start()

    def send(self, messages: Sequence[Message]) -> None:
        by_target: dict[str, list[Message]] = {}
        for message in messages:
            by_target.setdefault(message.target, []).append(message)
        if self._retiring:
            self._retire()
        for target, batch in by_target.items():
            sender = self._senders.get(target) or self._retiring_sender(target)
            if sender is None:
                _log.warning("no address for peer %s; %d messages dropped", target, len(batch))
                continue
            sender.offer(batch)

    def _retiring_sender(self, peer_id: str) -> _PeerSender | None:
        return next((s for _, s in reversed(self._retiring) if s.peer_id == peer_id), None)

    def _retire(self) -> None:
        now = time.monotonic()
        for deadline, sender in self._retiring:
            if deadline <= now:
                sender.close()
        self._retiring = [r for r in self._retiring if r[0] > now]

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop every sender (cancelling its stream) and wait for them, ``timeout_s`` in all;
        a sender still running then is left behind (a daemon thread) and logged."""
        senders = [*self._senders.values(), *(s for _, s in self._retiring)]
        for sender in senders:
            sender.close()
        deadline = time.monotonic() + timeout_s
        for sender in senders:
            if not sender.join(max(0.0, deadline - time.monotonic())):
                _log.warning("the sender to %s did not stop in %.1f s", sender.peer_id, timeout_s)
