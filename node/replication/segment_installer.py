"""fetch_segments: the follower's side of segment transfer: copy the leader's CommitLog
segments for a snapshot into a staging directory, checked, durable, ready for
``MessageStore.install_commit_log``.

Rules this module keeps: nothing in the live CommitLog changes here (a failed or partial
transfer leaves the node as it was, and the staging directory is emptied first); every chunk's
CRC32, segment size and position are checked (chunks arrive in order, without gaps); the
transfer ends only with the leader's SegmentsDone for the same snapshot; files and the
directory are fsynced before it returns; the call has a deadline.
"""

from __future__ import annotations

import os
import shutil
import zlib

import grpc

from raftlog.node.peer.dialer import PeerDialer
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.store.segment import segment_file_name


class SegmentTransferError(Exception):
    """The transfer failed; the follower keeps its log and waits for the next SNAPSHOT."""


def fetch_segments(
    dialer: PeerDialer,
    leader_id: str,
    leader_address: str,
    request: peer_pb2.FetchSegmentsRequest,
    staging_dir: str,
    segment_size_bytes: int,
    timeout_s: float,
) -> int:
    """Copy the snapshot's segments into ``staging_dir``; returns where the copied data ends
    (SegmentsDone.end_physical_offset). ``leader_address`` is the leader's client address;
    ``dialer`` reaches its peer port."""
    shutil.rmtree(staging_dir, ignore_errors=True)
    os.makedirs(staging_dir)
    files: dict[int, int] = {}  # segment start -> file descriptor
    expected: int | None = None
    try:
        peer_address = dialer.address_of(leader_id, leader_address)
        with dialer.channel(leader_id, peer_address) as channel:
            stub = peer_pb2_grpc.RaftPeerStub(channel)  # type: ignore[no-untyped-call]
            for chunk in stub.FetchSegments(request, timeout=timeout_s):
                if chunk.HasField("done"):
                    done = chunk.done
                    if done.snapshot.index != request.snapshot.index or not files:
                        raise SegmentTransferError("the leader finished another snapshot")
                    for fd in files.values():
                        os.fsync(fd)
                    _sync_dir(staging_dir)
                    return int(done.end_physical_offset)
                expected = _write_chunk(
                    chunk.data, files, staging_dir, segment_size_bytes, expected
                )
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
