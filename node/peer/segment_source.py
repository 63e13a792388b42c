"""SegmentSource: the leader's side of segment transfer (RaftPeer.FetchSegments).

A follower too far behind for APPENDs (retention deleted the entries it needs) gets a
SNAPSHOT message; in raftlog the snapshot IS the CommitLog, so it copies the leader's segment
bytes, from the leader's first retained segment up to the end of the snapshot point's entry.
Replicas are byte-identical, so the copied bytes are exactly what the follower would have
written itself.

Rules this module keeps: the snapshot asked for must be in the leader's log with the same term
(else NOT_FOUND: the follower waits for a newer SNAPSHOT); chunks never cross a segment file
and carry a CRC32; bytes are read straight from the files (no decoding), up to each file's
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
from raftlog.store.errors import StoreError

DEFAULT_CHUNK_BYTES = 1 << 20
MAX_CHUNK_BYTES = 16 << 20


class SegmentSource:
    """``end_of_entry(index, term)`` answers where that entry ends in this node's log (None
    when it does not hold it); the node runs it on its Raft loop."""

    def __init__(
        self, commit_log: CommitLog, end_of_entry: Callable[[int, int], int | None]
    ) -> None:
        self._commit_log = commit_log
        self._end_of_entry = end_of_entry

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
