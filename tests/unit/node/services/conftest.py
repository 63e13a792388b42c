"""Shared pieces of the client-service tests: a real MessageStore in tmp_path, a real gRPC
server on 127.0.0.1 serving the client services over it, and ``DispatchSignal``, the one
WritePath primitive the read RPCs use (wait_visible), fed by the test."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import grpc
import pytest

from raftlog.node.services.client_api import ClientServices, add_client_services
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2_grpc
from raftlog.store.config import StoreConfig
from raftlog.store.message_store import Message, MessageStore, PutResult

TOPIC = "orders"
QUEUE_COUNT = 4
# Short enough that a poll notices a stop quickly, long enough not to spin.
TEST_LIMITS = ServiceLimits(long_poll_slice_ms=50)


class DispatchSignal:
    """Implements only the read side of ``WritePath``: ``wait_visible``, a condition the test
    notifies after it wrote (the store dispatches its own writes), ``check_read``, which
    serves every pull (as a Raft member does), and ``catch_up``, which counts its calls.
    Produce, offsets and admin writes are not here: they are tested against the real Raft
    node."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._condition = threading.Condition()
        self.waits = 0
        self.catch_ups = 0

    def written(self) -> None:
        with self._condition:
            self._condition.notify_all()

    def check_read(self) -> None:
        return None

    def catch_up(self, timeout_s: float) -> bool:
        """A lone store is never behind: what it holds is the answer."""
        self.catch_ups += 1
        return False

    def wait_visible(self, after_physical_offset: int, timeout_s: float) -> int:
        with self._condition:
            self.waits += 1
            self._condition.wait_for(
                lambda: self._store.dispatched_physical_offset > after_physical_offset, timeout_s
            )
            return self._store.dispatched_physical_offset


@dataclass
class Harness:
    store: MessageStore
    signal: DispatchSignal
    services: ClientServices
    channel: grpc.Channel
    consumer: client_pb2_grpc.ConsumerStub
    admin: client_pb2_grpc.AdminStub
    producer: client_pb2_grpc.ProducerStub

    def put(self, messages: Sequence[Message]) -> list[PutResult]:
        results = self.store.put_messages(messages)
        self.signal.written()
        return results


def open_store(root: Path) -> MessageStore:
    config = StoreConfig(
        str(root),
        segment_size_bytes=1 << 20,
        consume_queue_file_units=64,
        index_slot_count=64,
        index_entry_count=256,
    )
    return MessageStore.open(config, housekeeping_interval_ms=None)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    with open_store(tmp_path / "store") as opened:
        opened.create_topic(TOPIC, QUEUE_COUNT)
        yield opened


def start_harness(store: MessageStore, limits: ServiceLimits) -> tuple[Harness, grpc.Server]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    signal = DispatchSignal(store)
    services = add_client_services(server, store, cast(WritePath, signal), limits)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    harness = Harness(
        store,
        signal,
        services,
        channel,
        client_pb2_grpc.ConsumerStub(channel),  # type: ignore[no-untyped-call]
        client_pb2_grpc.AdminStub(channel),  # type: ignore[no-untyped-call]
        client_pb2_grpc.ProducerStub(channel),  # type: ignore[no-untyped-call]
    )
    return harness, server


@pytest.fixture
def harness(store: MessageStore) -> Iterator[Harness]:
    started, server = start_harness(store, TEST_LIMITS)
    try:
        yield started
    finally:
        started.services.stop()
        started.channel.close()
        server.stop(grace=None).wait()


def message(queue_id: int = 0, body: bytes = b"payload", **fields: object) -> Message:
    return Message(topic=TOPIC, queue_id=queue_id, body=body, **fields)  # type: ignore[arg-type]


def call_error(method: Callable[..., object], request: object, **options: object) -> grpc.Call:
    """The error a call fails with (it must fail)."""
    with pytest.raises(grpc.RpcError) as raised:
        method(request, timeout=5, **options)
    return cast(grpc.Call, raised.value)


def call_status(method: Callable[..., object], request: object) -> grpc.StatusCode:
    return cast(grpc.StatusCode, call_error(method, request).code())
