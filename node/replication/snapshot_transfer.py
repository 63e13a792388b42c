"""Snapshot transfers and retention: a far-behind follower copies the leader's segments
before its core sees the SNAPSHOT, a leader gives up on a follower that never confirms one,
and retention compacts the Raft log before the store deletes segments.

Rules this module keeps:
- A follower stages the segments and the leader's control state (``fetch_segments``,
  blocking the Raft loop: it has nothing else useful to do) before the core steps the
  SNAPSHOT; a failed copy drops the message and the leader sends another. A leader
  that sends no control state (it predates it) is noted in the log: the install then keeps
  this member's own tables. The install itself is the Ready handler's.
- A leader that sent a SNAPSHOT reports failure to its core when the follower has not
  confirmed it within ``snapshot_transfer_timeout_s``, so a fresh one is sent.
- Segments are deleted only below the first entry the compacted log still holds.
Runs on the Raft loop only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from raftlog.node.peer.codec import encode_snapshot_meta
from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.node.replication.ready import ReadyHandler
from raftlog.node.replication.segment_installer import SegmentTransferError, fetch_segments
from raftlog.proto import peer_pb2
from raftlog.raft.progress import ProgressState
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import Message, MessageType
from raftlog.store.message_store import MessageStore

if TYPE_CHECKING:
    from raftlog.node.replication.replica import ReplicaSettings

_log = logging.getLogger(__name__)


class SnapshotTransfers:
    def __init__(
        self, settings: ReplicaSettings, store: MessageStore, raft_log: RaftLogStorage
    ) -> None:
        self._settings = settings
        self._store = store
        self._raft_log = raft_log
        # Leader: peers sent a SNAPSHOT, and when to give up on them (monotonic s).
        self._deadlines: dict[str, float] = {}

    def stage(self, message: Message, node: RawNode, ready: ReadyHandler) -> bool:
        """Copy the segments of ``message``'s snapshot so the core can install it; False drops
        the message."""
        meta = message.snapshot
        assert meta is not None
        if message.term < node.term or meta.index <= node.commit_index:
            return True  # the core ignores or acknowledges it without installing anything
        settings = self._settings
        address = settings.peer_addresses.get(message.source)
        if address is None:
            return False
        request = peer_pb2.FetchSegmentsRequest(
            cluster_id=settings.cluster_id,
            node_id=settings.node_id,
            snapshot=encode_snapshot_meta(meta),
            from_physical_offset=self._raft_log.log_end_physical_offset,
            with_control_state=True,
        )
        started = time.monotonic()
        try:
            fetched = fetch_segments(
                settings.dialer,
                message.source,
                address,
                request,
                settings.staging_dir,
                self._store.commit_log.segment_size_bytes,
                settings.snapshot_transfer_timeout_s,
            )
        except (SegmentTransferError, OSError) as error:
            _log.warning("snapshot %d from %s not installed: %s", meta.index, message.source, error)
            return False
        _log.info(
            "copied the segments of snapshot %d (term %d) from %s in %.1f s, %s",
            meta.index,
            meta.term,
            message.source,
            time.monotonic() - started,
            "with no control state: this member keeps its own topics, offsets and rules"
            if fetched.control_state_index is None
            else f"with its control state as of index {fetched.control_state_index}",
        )
        ready.staged_snapshot = (meta.index, fetched.end_physical_offset)
        return True

    def sent(self, messages: Sequence[Message], now_s: float) -> None:
        deadline = now_s + self._settings.snapshot_transfer_timeout_s
        for message in messages:
            if message.type is MessageType.SNAPSHOT:
                self._deadlines[message.target] = deadline

    def expire(self, now_s: float, node: RawNode) -> None:
        """A follower that did not confirm a snapshot in time gets a fresh one."""
        if not self._deadlines:
            return
        progress = node.status().progress
        for peer_id, deadline in list(self._deadlines.items()):
            state = progress.get(peer_id)
            if state is None or state.state is not ProgressState.SNAPSHOT:
                del self._deadlines[peer_id]
            elif now_s >= deadline:
                del self._deadlines[peer_id]
                node.report_snapshot(peer_id, False)

    def retain(self, applied_index: int, node: RawNode) -> None:
        """Compact the Raft log over what the store's retention policy lets go, then delete
        those segments."""
        store, raft_log = self._store, self._raft_log
        deletable_end = store.retention_deletable_end_offset()
        if deletable_end <= store.commit_log.min_offset:
            return
        compact_index = raft_log.last_index_ending_by(deletable_end, applied_index)
        if compact_index > raft_log.first_index() - 1:
            raft_log.compact(compact_index, node.conf_state)
        first_kept = compact_index + 1
        bound = (
            raft_log.placement(first_kept).physical_offset
            if first_kept <= raft_log.last_index()
            else raft_log.log_end_physical_offset
        )
        report = store.run_retention(max_deleted_end_offset=bound)
        if report.deleted_segments:
            _log.info(
                "retention: compacted the log to index %d, deleted %d segment(s)",
                compact_index,
                report.deleted_segments,
            )
