"""Installing a snapshot on a follower: its CommitLog is replaced by the leader's segments,
crash-safely.

The segments are already staged and fsynced (segment_installer.fetch_segments). Then:
1. a marker ``<staging>/INSTALL`` records the snapshot (meta, where its data ends, the segment
   file names), written atomically;
2. the store swaps the files in and drops its derived data (``install_commit_log``), and the
   Raft log restarts after the snapshot (``apply_snapshot``);
3. the marker goes (durably: a marker back from a power loss would replay this install over
   newer entries), then the staging directory.

A crash between 1 and 3 is finished by ``resume_interrupted_install`` at the next start, before
the store opens: the listed files end up in the CommitLog directory (those still staged are
moved in, any other is removed), ConsumeQueues, IndexFiles and the checkpoint are dropped (the
store re-derives them), and the Raft log is reset to the snapshot point. So a node never
starts with a half-replaced CommitLog. A crash before 1 leaves the old log untouched (the
staging directory is emptied by the next transfer).
"""

from __future__ import annotations

import os

from raftlog.node.replication.raft_log_storage import RaftLogStorage, reset_log_to_snapshot
from raftlog.raft.types import ConfState, SnapshotMeta
from raftlog.store.atomic_file import read_json_document, write_json_document
from raftlog.store.checkpoint import checkpoint_path
from raftlog.store.consume_queue import CONSUME_QUEUE_DIR
from raftlog.store.filesystem import FileSystem
from raftlog.store.index_file import INDEX_DIR
from raftlog.store.message_store import COMMIT_LOG_DIR, MessageStore
from raftlog.store.segment import parse_segment_file_name

MARKER_FILE_NAME = "INSTALL"
_MARKER_VERSION = 1


def _staged_names(fs: FileSystem, staging_dir: str) -> list[str]:
    return sorted(n for n in fs.listdir(staging_dir) if parse_segment_file_name(n) is not None)


def install_snapshot(
    fs: FileSystem,
    store: MessageStore,
    raft_log: RaftLogStorage,
    staging_dir: str,
    meta: SnapshotMeta,
    end_physical_offset: int,
) -> None:
    """Steps 1-3 of the module docstring (on the Raft loop)."""
    write_json_document(
        fs,
        os.path.join(staging_dir, MARKER_FILE_NAME),
        _MARKER_VERSION,
        {
            "index": meta.index,
            "term": meta.term,
            "voters": list(meta.conf_state.voters),
            "learners": list(meta.conf_state.learners),
            "end_physical_offset": end_physical_offset,
            "segments": _staged_names(fs, staging_dir),
        },
    )
    store.install_commit_log(staging_dir, end_physical_offset)
    raft_log.apply_snapshot(meta, end_physical_offset)
    discard_staging(fs, staging_dir)


def resume_interrupted_install(fs: FileSystem, store_dir: str, staging_dir: str) -> bool:
    """Finish an install a crash interrupted (see the module docstring); True when there was
    one. Call it before the store and the Raft log open."""
    marker = read_json_document(fs, os.path.join(staging_dir, MARKER_FILE_NAME), _MARKER_VERSION)
    if marker is None:
        fs.remove_tree(staging_dir)
        return False
    names = [str(name) for name in marker["segments"]]
    commit_log_dir = os.path.join(store_dir, COMMIT_LOG_DIR)
    fs.makedirs(commit_log_dir)
    staged = set(fs.listdir(staging_dir))
    for name in names:
        if name in staged:
            fs.rename(os.path.join(staging_dir, name), os.path.join(commit_log_dir, name))
    for name in fs.listdir(commit_log_dir):
        if name not in names:
            fs.remove(os.path.join(commit_log_dir, name))
    fs.sync_dir(commit_log_dir)
    for derived in (CONSUME_QUEUE_DIR, INDEX_DIR):
        fs.remove_tree(os.path.join(store_dir, derived))
    if fs.exists(checkpoint_path(store_dir)):
        fs.remove(checkpoint_path(store_dir))
    meta = SnapshotMeta(
        int(marker["index"]),
        int(marker["term"]),
        ConfState(tuple(marker["voters"]), tuple(marker["learners"])),
    )
    reset_log_to_snapshot(fs, store_dir, meta, int(marker["end_physical_offset"]))
    fs.sync_dir(store_dir)
    discard_staging(fs, staging_dir)
    return True


def discard_staging(fs: FileSystem, staging_dir: str) -> None:
    """Remove the staging directory, its marker durably first: a marker that came back after
    a power loss (its removal not yet durable) would make the next start "finish" this
    install again, over the entries written since."""
    marker_path = os.path.join(staging_dir, MARKER_FILE_NAME)
    if fs.exists(marker_path):
        fs.remove(marker_path)
        fs.sync_dir(staging_dir)
    fs.remove_tree(staging_dir)
