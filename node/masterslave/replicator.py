"""SlaveReplicator: a slave's end of the HA stream: copy the master's CommitLog byte for byte.

One thread keeps one ``HaPeer.Replicate`` stream open to the master. It reports where its
CommitLog ends, stores each chunk exactly where the master had it (the store refuses bytes
that would land elsewhere, or whose CRCs fail), applies the control records in it (topics,
consumer offsets), makes the records visible, and reports again. A broken stream is reopened
after a short, growing pause.

Rules this module keeps:
- Nothing unverified is written: the chunk's CRC32 covers every byte, and every record's
  structure is checked (append_replicated); the records keep their own CRCs, which readers
  and recovery check as on the master.
- A chunk is applied in order: bytes, then control records, then dispatch, then the report;
  so what the master counts as held is on this slave's disk as configured.
- The slave truncates only when its master says so (the first chunk of a stream, computed
  from both epoch histories), never on its own; it adopts the master's epochs as it copies
  the bytes they cover.
- Every wait is bounded; ``close`` ends the thread within about one second. The channel
  pings the master (the peer transport's keepalive), so a paused or cut-off master ends the
  stream within about three seconds and the slave reconnects.
"""

from __future__ import annotations

import logging
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import grpc

from raftlog.node.control import (
    CONTROL_TOPIC,
    STORE_COMMAND_TYPES,
    apply_to_store,
    control_command_of,
)
from raftlog.node.masterslave.epochs import EpochEntry, EpochHistory
from raftlog.node.peer.dialer import PeerDialer
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.store.errors import StoreError
from raftlog.store.message_store import MessageStore
from raftlog.store.record import RecordShape

_log = logging.getLogger("raftlog.node.ha")
_RETRY_FIRST_S = 0.05
_RETRY_MAX_S = 1.0


@dataclass(frozen=True, slots=True)
class ReplicatorSettings:
    cluster_id: str
    broker_name: str
    node_id: str
    # The master's peer address (PeerDialer.address_of), and how to dial it.
    master_address: str
    master_id: str = ""
    dialer: PeerDialer = field(default_factory=PeerDialer)


class SlaveReplicator:
    def __init__(
        self,
        settings: ReplicatorSettings,
        store: MessageStore,
        history: EpochHistory,
        on_visible: Callable[[], None],
    ) -> None:
        self._settings = settings
        self._store = store
        self._history = history
        self._master_epochs: list[EpochEntry] = []
        self._on_visible = on_visible
        self._stop = threading.Event()
        self._call: grpc.Future | None = None
        self._lock = threading.Lock()
        self.connected = False
        self.master_max_offset = 0
        # The master's confirmed offset (under a controller, readers see nothing past it).
        self.confirm_offset = 0
        self._thread = threading.Thread(target=self._run, name="ha-slave", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        pause_s = _RETRY_FIRST_S
        while not self._stop.is_set():
            try:
                self._stream_once()
                pause_s = _RETRY_FIRST_S
            except grpc.RpcError as error:
                if not self._stop.is_set():
                    _log.warning(
                        "HA stream to %s: %s", self._settings.master_address, _describe(error)
                    )
            except (StoreError, ValueError) as error:
                _log.error(
                    "HA stream to %s: refused a chunk: %s", self._settings.master_address, error
                )
            self.connected = False
            self._stop.wait(pause_s)
            pause_s = min(pause_s * 2, _RETRY_MAX_S)

    def _report(self, first: bool = False) -> peer_pb2.SlaveReport:
        log = self._store.commit_log
        return peer_pb2.SlaveReport(
            cluster_id=self._settings.cluster_id,
            broker_name=self._settings.broker_name,
            node_id=self._settings.node_id,
            max_offset=log.max_offset,
            flushed_offset=log.flushed_offset,
            epoch=self._history.last_epoch,
            epochs=[
                peer_pb2.EpochEntry(epoch=e.epoch, start_offset=e.start_offset)
                for e in self._history.entries
            ]
            if first
            else [],
        )

    def _stream_once(self) -> None:
        reports: queue.Queue[peer_pb2.SlaveReport | None] = queue.Queue()
        reports.put(self._report(first=True))
        settings = self._settings
        with settings.dialer.channel(settings.master_id, settings.master_address) as channel:
            stub = peer_pb2_grpc.HaPeerStub(channel)  # type: ignore[no-untyped-call]
            call = stub.Replicate(_drain(reports, self._stop))
            with self._lock:
                self._call = call
            if self._stop.is_set():
                call.cancel()
            try:
                for chunk in call:
                    self.connected = True
                    self._store_chunk(chunk)
                    reports.put(self._report())
            finally:
                reports.put(None)
                with self._lock:
                    self._call = None

    def _store_chunk(self, chunk: peer_pb2.CommitLogChunk) -> None:
        self.master_max_offset = chunk.master_max_offset
        if chunk.confirm_offset > self.confirm_offset:
            self.confirm_offset = chunk.confirm_offset
            if not chunk.data:  # a heartbeat that moves the confirmed offset: show it
                self._store.dispatch()
                self._on_visible()
        if chunk.epochs:  # the stream's first chunk
            self._master_epochs = [EpochEntry(e.epoch, e.start_offset) for e in chunk.epochs]
            if chunk.truncate:
                self._truncate(chunk.physical_offset)
        data = chunk.data
        if not data:
            return
        if zlib.crc32(data) != chunk.data_crc32:
            raise ValueError(f"chunk at {chunk.physical_offset}: CRC mismatch")
        records = self._store.append_replicated(chunk.physical_offset, data)
        end = chunk.physical_offset + len(data)
        for entry in self._master_epochs:
            if entry.start_offset < end and entry.epoch > self._history.last_epoch:
                self._history.begin(entry.epoch, entry.start_offset)
        self._apply_controls(data, records)
        self._store.dispatch()
        self._on_visible()

    def _truncate(self, offset: int) -> None:
        """Drop what this replica holds past ``offset`` (bytes no master vouches for: a
        deposed master's unreplicated tail), with the epochs that started past it."""
        held = self._store.commit_log.max_offset
        _log.warning(
            "truncating the CommitLog from %d (held up to %d): the master's history does "
            "not vouch for those bytes",
            offset,
            held,
        )
        self._store.truncate_after(offset)
        self._history.truncate(offset)

    def _apply_controls(self, data: bytes, records: list[RecordShape]) -> None:
        position = 0
        for record in records:
            if record.topic == CONTROL_TOPIC:
                command = control_command_of(data[position : position + record.size])
                if command is not None and isinstance(command[0], STORE_COMMAND_TYPES):
                    try:
                        apply_to_store(self._store, command[0])
                    except StoreError as error:
                        _log.warning("control record not applied: %s", error)
            position += record.size


def _drain(
    reports: queue.Queue[peer_pb2.SlaveReport | None], stop: threading.Event
) -> Iterator[peer_pb2.SlaveReport]:
    """The request stream: reports as they are queued, until None or ``stop``."""
    while not stop.is_set():
        try:
            report = reports.get(timeout=0.5)
        except queue.Empty:
            continue
        if report is None:
            return
        yield report


def _describe(error: grpc.RpcError) -> str:
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    return f"{code.name if code else 'error'}: {details}"
