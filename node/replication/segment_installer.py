"""fetch_segments: the follower's side of segment transfer: copy the leader's CommitLog
segments for a snapshot, and its control state (topics, consumer offsets, access rules) when
the request asks for it, into a staging directory, checked, durable, ready for
snapshot_install.install_snapshot.

Rules this module keeps: nothing in the live CommitLog or tables changes here (a failed or
partial transfer leaves the node as it was, and the staging directory is emptied first);
every chunk's CRC32, segment size and position are checked (chunks arrive in order, without
gaps), and so is every control-state piece's; the control state is staged only whole and
decodable (``CONTROL_STATE_FILE_NAME``); the transfer ends only with the leader's
SegmentsDone for the same snapshot; files and the directory are fsynced before it returns;
the call has a deadline.
"""

from __future__ import annotations

import os
import shutil
import zlib
from dataclasses import dataclass

import grpc

from raftlog.node.peer.dialer import PeerDialer
from raftlog.node.replication.snapshot_install import CONTROL_STATE_FILE_NAME
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.store.control_state import decode_control_state
from raftlog.store.segment import segment_file_name


class SegmentTransferError(Exception):
    """The transfer failed; the follower keeps its log and waits for the next SNAPSHOT."""


@dataclass(frozen=True, slots=True)
class FetchedSnapshot:
    end_physical_offset: int
    """Where the copied data ends (SegmentsDone.end_physical_offset)."""
    control_state_index: int | None
    """The leader's applied index its staged control state reflects; None when it sent none
    (it predates the control state, or the request did not ask)."""


class _ControlStatePieces:
    """The control-state document as its pieces arrive (in order, CRC-checked)."""

    def __init__(self) -> None:
        self.document = bytearray()
        self.applied_index: int | None = None
        self.total_bytes = 0

    def add(self, piece: peer_pb2.ControlStateData) -> None:
        if zlib.crc32(piece.data) != piece.data_crc32:
            raise SegmentTransferError(f"control state piece at {piece.position}: bad CRC")
        if (
            piece.position != len(self.document)
            or (self.applied_index is not None and piece.applied_index != self.applied_index)
            or (self.applied_index is not None and piece.total_bytes != self.total_bytes)
            or piece.position + len(piece.data) > piece.total_bytes
        ):
            raise SegmentTransferError(
                f"control state piece at {piece.position}, expected {len(self.document)} of "
                f"{self.total_bytes or piece.total_bytes}: out of order"
            )
        self.document += piece.data
        self.applied_index = int(piece.applied_index)
        self.total_bytes = int(piece.total_bytes)

    def stage(self, staging_dir: str) -> int | None:
        """Write the whole, decodable document into ``staging_dir`` (fsynced; the caller
        syncs the directory); returns the applied index it reflects, None when none came."""
        if self.applied_index is None:
            return None
        if len(self.document) != self.total_bytes:
            raise SegmentTransferError(
                f"the control state ended at {len(self.document)} of {self.total_bytes} bytes"
            )
        try:
            decode_control_state(bytes(self.document))
        except ValueError as error:
            raise SegmentTransferError(f"the leader's control state: {error}") from error
        fd = os.open(
            os.path.join(staging_dir, CONTROL_STATE_FILE_NAME),
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
            0o644,
        )
        try:
            unwritten = memoryview(self.document)
            while unwritten:
                unwritten = unwritten[os.write(fd, unwritten) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        return self.applied_index


def fetch_segments(
    dialer: PeerDialer,
    leader_id: str,
    leader_address: str,
    request: peer_pb2.FetchSegmentsRequest,
    staging_dir: str,
    segment_size_bytes: int,
    timeout_s: float,
) -> FetchedSnapshot:
    """Copy the snapshot's segments (and the leader's control state, when ``request`` asks
    for it) into ``staging_dir``. ``leader_address`` is the leader's client address;
    ``dialer`` reaches its peer port."""
    shutil.rmtree(staging_dir, ignore_errors=True)
    os.makedirs(staging_dir)
    files: dict[int, int] = {}  # segment start -> file descriptor
    control = _ControlStatePieces()
    expected: int | None = None
    try:
        peer_address = dialer.address_of(leader_id, leader_address)
        with dialer.channel(leader_id, peer_address) as channel:
            stub = peer_pb2_grpc.RaftPeerStub(channel)  # type: ignore[no-untyped-call]
            for chunk in stub.FetchSegments(request, timeout=timeout_s):
                kind = chunk.WhichOneof("chunk")
                if kind == "done":
                    done = chunk.done
                    if done.snapshot.index != request.snapshot.index or not files:
                        raise SegmentTransferError("the leader finished another snapshot")
                    control_state_index = control.stage(staging_dir)
                    for fd in files.values():
                        os.fsync(fd)
                    _sync_dir(staging_dir)
                    return FetchedSnapshot(int(done.end_physical_offset), control_state_index)
                if kind == "control_state":
                    control.add(chunk.control_state)
                elif kind == "data":
                    expected = _write_chunk(
                        chunk.data, files, staging_dir, segment_size_bytes, expected
                    )
                else:
                    raise SegmentTransferError(f"an unknown chunk ({kind}) from the leader")
    except grpc.RpcError as error:
        raise SegmentTransferError(
            f"segment transfer from {leader_address} failed: {error.code()} {error.details()}"
        ) from error
    finally:
        for fd in files.values():
            os.close(fd)
    raise SegmentTransferError(f"segment transfer from {leader_address} ended without done")


def _write_chunk(
    data: peer_pb2.SegmentData,
    files: dict[int, int],
    staging_dir: str,
    segment_size_bytes: int,
    expected: int | None,
) -> int:
    """Check and write one chunk; returns the physical offset the next chunk must start at."""
    if data.segment_size_bytes != segment_size_bytes:
        raise SegmentTransferError(
            f"the leader's segments are {data.segment_size_bytes} bytes, ours "
            f"{segment_size_bytes}: segment_size_bytes must be the same on every member"
        )
    if zlib.crc32(data.data) != data.data_crc32:
        raise SegmentTransferError(
            f"chunk at {data.segment_start_offset}+{data.file_offset}: bad CRC"
        )
    start = data.segment_start_offset
    position = start + data.file_offset
    if (
        start % segment_size_bytes
        or not 0 <= data.file_offset < segment_size_bytes
        or (data.file_offset + len(data.data) > segment_size_bytes)
    ):
        raise SegmentTransferError(f"chunk at {start}+{data.file_offset} does not fit a segment")
    if (
        expected is not None
        and position != expected
        and not (
            data.file_offset == 0
            and start == expected - expected % segment_size_bytes + segment_size_bytes
        )
    ):
        raise SegmentTransferError(f"chunk at {position}, expected {expected}: a gap")
    if start not in files:
        files[start] = os.open(
            os.path.join(staging_dir, segment_file_name(start)), os.O_WRONLY | os.O_CREAT, 0o644
        )
    os.pwrite(files[start], data.data, data.file_offset)
    return position + len(data.data)


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
