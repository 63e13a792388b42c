"""HaPeerService: the master's end of the HA stream (peer.proto ``HaPeer.Replicate``).

Each slave holds one stream. The master checks the slave's first report (cluster, broker
group, and that the slave's log is a prefix of its own), then sends whole records from the
slave's end on, in chunks of at most ``chunk_bytes`` that never cross a segment, and an empty
chunk every ``heartbeat_s`` when there is nothing new. A reader thread per stream takes the
slave's reports and hands them to MasterState (in-sync tracking, SYNC_MASTER waits).

Rules this module keeps:
- Only the group's other members may stream: a report naming any other node id, or (with
  TLS) a node id the caller's verified certificate does not name, is PERMISSION_DENIED
  before anything is sent, as the Raft peer service refuses strangers.
- Bad input gets a gRPC status with a message (peer.proto lists them), never a crash; a
  report that goes backwards ends the stream (the slave reconnects from what it holds).
- The stream starts where the two epoch histories agree (epochs.consistent_offset); a
  slave holding bytes past that point is told to truncate them first (the first chunk says
  so, with the master's history). A slave that would need bytes the master no longer has is
  refused.
- Every loop ends when the stream ends, the master closes, or the call is cancelled.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import grpc

from raftlog.node.masterslave.epochs import (
    FIRST_EPOCH,
    EpochEntry,
    EpochHistory,
    EpochHistoryError,
    check_entries,
    consistent_offset,
)
from raftlog.node.masterslave.master_state import MasterState
from raftlog.node.masterslave.roles import RoleHolder
from raftlog.node.security.tls import certificate_names
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.store.errors import CorruptRecordError
from raftlog.store.message_store import MessageStore

_log = logging.getLogger("raftlog.node.ha")


@dataclass(frozen=True, slots=True)
class HaServiceSettings:
    cluster_id: str
    broker_name: str
    # The group's other members: only they may stream (a slave names itself in its report).
    slave_ids: frozenset[str] = frozenset()
    # With TLS, the slave's verified certificate must name the node id it reports.
    check_certificates: bool = False
    chunk_bytes: int = 1 << 20
    heartbeat_s: float = 1.0


class _Sent:
    """What the stream last sent, for the reader thread's caught-up rule."""

    def __init__(self, end_offset: int, at_ms: int) -> None:
        self.end_offset = end_offset
        self.at_ms = at_ms


class HaPeerService(peer_pb2_grpc.HaPeerServicer):
    def __init__(
        self,
        settings: HaServiceSettings,
        store: MessageStore,
        roles: RoleHolder,
        history: EpochHistory,
    ) -> None:
        self._settings = settings
        self._store = store
        self._roles = roles
        self._history = history

    def Replicate(
        self, request_iterator: Iterator[peer_pb2.SlaveReport], context: grpc.ServicerContext
    ) -> Iterator[peer_pb2.CommitLogChunk]:
        first = next(request_iterator, None)
        if first is None:
            return
        # The stream belongs to this master term: it ends when the member steps down.
        state = self._roles.current().master_state
        if state is None:
            master = self._roles.master_address()
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"not the master; the master is at {master}" if master else "not the master",
            )
            return  # abort raised; this says so to the type checker
        start, truncate = self._check_first(first, context)
        node_id = first.node_id
        sent = _Sent(start, state.now_ms())
        state.slave_reported(node_id, start, sent.end_offset, sent.at_ms)
        reader = threading.Thread(
            target=self._read_reports,
            args=(request_iterator, node_id, state, sent, context),
            name=f"ha-reports-{node_id}",
            daemon=True,
        )
        reader.start()
        _log.info(
            "slave %s streams from offset %d%s", node_id, start, " (truncating)" if truncate else ""
        )
        try:
            yield peer_pb2.CommitLogChunk(
                physical_offset=start,
                master_max_offset=self._store.commit_log.max_offset,
                master_epoch=self._history.last_epoch,
                truncate=truncate,
                epochs=[
                    peer_pb2.EpochEntry(epoch=e.epoch, start_offset=e.start_offset)
                    for e in self._history.entries
                ],
            )
            yield from self._chunks(start, state, sent, context)
        finally:
            state.slave_gone(node_id)
            _log.info("slave %s stream ended", node_id)

    def _check_first(
        self, report: peer_pb2.SlaveReport, context: grpc.ServicerContext
    ) -> tuple[int, bool]:
        """Where the slave's stream starts (the last point both logs agree on), and whether
        it must first truncate its log there."""
        settings = self._settings
        if report.cluster_id != settings.cluster_id or report.broker_name != settings.broker_name:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"this master serves cluster {settings.cluster_id!r} broker "
                f"{settings.broker_name!r}, not cluster {report.cluster_id!r} broker "
                f"{report.broker_name!r}",
            )
        if not report.node_id or report.max_offset < 0 or report.flushed_offset < 0:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed slave report")
        slave_epochs = [EpochEntry(e.epoch, e.start_offset) for e in report.epochs]
        try:
            check_entries(slave_epochs)
        except EpochHistoryError as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"slave epoch history: {error}")
        if report.node_id not in settings.slave_ids:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{report.node_id!r} is not a member of broker {settings.broker_name!r}",
            )
        if settings.check_certificates and report.node_id not in certificate_names(context):
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"the caller's certificate does not name {report.node_id!r}",
            )
        log = self._store.commit_log
        start = consistent_offset(
            slave_epochs or [FIRST_EPOCH],
            report.max_offset,
            self._history.entries,
            log.max_offset,
        )
        if start < log.min_offset:
            context.abort(
                grpc.StatusCode.OUT_OF_RANGE,
                f"slave {report.node_id} must copy from {start}; this master keeps bytes "
                f"from {log.min_offset} on (retention deleted the rest)",
            )
        return start, start < report.max_offset

    def _chunks(
        self, start: int, state: MasterState, sent: _Sent, context: grpc.ServicerContext
    ) -> Iterator[peer_pb2.CommitLogChunk]:
        settings, log = self._settings, self._store.commit_log
        offset = start
        while context.is_active() and not state.closed:
            try:
                position, data = log.read_items(offset, settings.chunk_bytes)
            except CorruptRecordError as error:
                _log.error("cannot stream the CommitLog at %d: %s", offset, error)
                context.abort(grpc.StatusCode.INTERNAL, str(error))
            if not data:
                state.wait_for_bytes(offset, settings.heartbeat_s)
                if log.max_offset > offset:
                    continue
            sent.end_offset, sent.at_ms = log.max_offset, state.now_ms()
            yield peer_pb2.CommitLogChunk(
                physical_offset=position,
                data=data,
                data_crc32=zlib.crc32(data),
                master_max_offset=sent.end_offset,
                confirm_offset=state.confirmed_offset(),
                master_epoch=self._history.last_epoch,
            )
            offset = position + len(data)

    def _read_reports(
        self,
        reports: Iterator[peer_pb2.SlaveReport],
        node_id: str,
        state: MasterState,
        sent: _Sent,
        context: grpc.ServicerContext,
    ) -> None:
        last = -1
        try:
            for report in reports:
                if report.node_id != node_id or report.max_offset < last:
                    _log.warning("slave %s sent an inconsistent report; ending its stream", node_id)
                    context.cancel()
                    return
                last = report.max_offset
                state.slave_reported(node_id, report.max_offset, sent.end_offset, sent.at_ms)
        except grpc.RpcError:
            pass  # the stream ended; Replicate's finally forgets the slave
