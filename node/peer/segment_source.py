"""SegmentSource: the leader's side of segment transfer (RaftPeer.FetchSegments).

A follower too far behind for APPENDs (retention deleted the entries it needs) gets a
SNAPSHOT message; in raftlog the snapshot IS the CommitLog, so it copies the leader's segment
bytes, from the leader's first retained segment up to the end of the snapshot point's entry.
Replicas are byte-identical, so the copied bytes are exactly what the follower would have
written itself. What the deleted segments' control records built -- topics, consumer offsets,
access rules -- cannot be copied as bytes: when asked (``with_control_state``), the leader
first sends those tables, captured at its applied index, as one document in pieces
(node/replication/snapshot_install.py says why installing them is sound).

Rules this module keeps: the snapshot asked for must be in the leader's log with the same term
(else NOT_FOUND: the follower waits for a newer SNAPSHOT); the control state is captured where
the tables change (``control_state``: on the Raft loop), at an applied index at or past the
snapshot's (else UNAVAILABLE); chunks never cross a segment file and every chunk and piece
carries a CRC32; bytes are read straight from the files (no decoding), up to each file's
length; a segment deleted by retention meanwhile ends the stream with UNAVAILABLE (the
follower retries with the next SNAPSHOT); the last item is exactly one SegmentsDone.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator

import grpc

from raftlog.node.peer.codec import decode_snapshot_meta
from raftlog.proto import peer_pb2
from raftlog.store.commit_log import CommitLog
from raftlog.store.control_state import ControlState, encode_control_state
from raftlog.store.errors import StoreError

DEFAULT_CHUNK_BYTES = 1 << 20
MAX_CHUNK_BYTES = 16 << 20


ControlStateCapture = Callable[[int], tuple[int, ControlState] | None]
"""``capture(index)``: this node's applied index and control state, when it applied at least
``index`` (else None); the node runs it on its Raft loop."""


class SegmentSource:
    """``end_of_entry(index, term)`` answers where that entry ends in this node's log (None
    when it does not hold it); the node runs it on its Raft loop. ``control_state`` captures
    the tables (ControlStateCapture)."""

    def __init__(
        self,
        commit_log: CommitLog,
        end_of_entry: Callable[[int, int], int | None],
        control_state: ControlStateCapture,
    ) -> None:
        self._commit_log = commit_log
        self._end_of_entry = end_of_entry
        self._control_state = control_state

    def fetch(
        self, request: peer_pb2.FetchSegmentsRequest, context: grpc.ServicerContext
    ) -> Iterator[peer_pb2.SegmentChunk]:
        meta = decode_snapshot_meta(request.snapshot)
        end = self._end_of_entry(meta.index, meta.term)
        if end is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"this node does not hold entry {meta.index} of term {meta.term}; wait for a "
                "newer snapshot",
            )
        assert end is not None
        chunk_bytes = min(request.max_chunk_bytes or DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES)
        if request.with_control_state:
            captured = self._control_state(meta.index)
            if captured is None:
                context.abort(
                    grpc.StatusCode.UNAVAILABLE,
                    f"this node has not applied entry {meta.index} yet; wait for the next snapshot",
                )
            assert captured is not None
            yield from _control_pieces(*captured, chunk_bytes)
        try:
            yield from self._chunks(end, chunk_bytes)
        except (StoreError, OSError) as error:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"segment transfer broke off: {error}")
        yield peer_pb2.SegmentChunk(
            done=peer_pb2.SegmentsDone(snapshot=request.snapshot, end_physical_offset=end)
        )

    def _chunks(self, end: int, chunk_bytes: int) -> Iterator[peer_pb2.SegmentChunk]:
        log = self._commit_log
        segment_size = log.segment_size_bytes
        segments = log.segments()
        first_start = segments[0].start_offset if segments else log.min_offset
        if end <= first_start:
            # Nothing of the snapshot is retained: the follower's log starts empty here.
            yield _chunk(first_start, segment_size, 0, b"")
            return
        for segment in segments:
            if segment.start_offset >= end:
                break
            data_end = min(end, segment.start_offset + segment.size_bytes)
            position = segment.start_offset
            while position < data_end:
                size = min(chunk_bytes, data_end - position)
                data = log.read(position, size)
                yield _chunk(
                    segment.start_offset, segment_size, position - segment.start_offset, data
                )
                position += size
            if data_end == segment.start_offset:
                yield _chunk(segment.start_offset, segment_size, 0, b"")


def _control_pieces(
    applied_index: int, state: ControlState, piece_bytes: int
) -> Iterator[peer_pb2.SegmentChunk]:
    """The document of ``state`` in pieces of at most ``piece_bytes`` (at least one)."""
    document = encode_control_state(state)
    for position in range(0, max(len(document), 1), piece_bytes):
        data = document[position : position + piece_bytes]
        yield peer_pb2.SegmentChunk(
            control_state=peer_pb2.ControlStateData(
                applied_index=applied_index,
                position=position,
                data=data,
                data_crc32=zlib.crc32(data),
                total_bytes=len(document),
            )
        )


def _chunk(start: int, segment_size: int, file_offset: int, data: bytes) -> peer_pb2.SegmentChunk:
    return peer_pb2.SegmentChunk(
        data=peer_pb2.SegmentData(
            segment_start_offset=start,
            segment_size_bytes=segment_size,
            file_offset=file_offset,
            data=data,
            data_crc32=zlib.crc32(data),
        )
    )
