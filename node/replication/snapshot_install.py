"""Installing a snapshot on a follower: its CommitLog is replaced by the leader's segments, and
its replicated tables (topics, consumer offsets, access rules) by the leader's, crash-safely.

The segments, and the leader's control state when it sent one, are already staged and
fsynced (segment_installer.fetch_segments; the state as ``CONTROL_STATE_FILE_NAME``). Then:
1. a marker ``<staging>/INSTALL`` records the snapshot (meta, where its data ends, the segment
   file names, whether a control state is staged), written atomically;
2. the store swaps the files in and drops its derived data (``install_commit_log``), replaces
   its three tables by the staged control state (``replace_control_state``), and the Raft log
   restarts after the snapshot (``apply_snapshot``);
3. the marker goes (durably: a marker back from a power loss would replay this install over
   newer entries), then the staging directory.

A crash between 1 and 3 is finished by ``resume_interrupted_install`` at the next start, before
the store opens: the listed files end up in the CommitLog directory (those still staged are
moved in, any other is removed), ConsumeQueues, IndexFiles and the checkpoint are dropped (the
store re-derives them), the three table files are rewritten from the staged control state,
and the Raft log is reset to the snapshot point. So a node never starts with a half-replaced
CommitLog, nor with the leader's segments under its own old tables. A crash before 1 leaves
the old log and tables untouched (the staging directory is emptied by the next transfer).

Why the control state travels with the segments: topics, offsets and access rules are built by
applying control records (node/control.py), and retention deletes the segments holding them,
so a member that copies only the retained segments could never apply them (a new member
would hold no topic; a returning one would keep its stale tables).

Why installing the leader's tables and then applying the log after the snapshot is sound:
the leader captures its tables on its Raft loop at its applied index A (never below the
snapshot index S: a node offers only a snapshot point it compacted to, which it had applied).
The follower installs them with applied index S, so it applies entries S+1..A a second time,
over a state that already contains them. Each kind of control record is idempotent in this
sense -- re-applying a suffix of the log to the state the whole log produced changes nothing:
- ``CreateTopic`` only creates or grows (TopicTable refuses to shrink): a topic's queue count
  is the largest any applied record asked for, and re-applying records already counted
  cannot change a maximum. A refused record (bad name, shrink) is refused again.
- ``CommitOffsets`` sets each (group, topic, queue) to a value: after S+1..A is applied again
  each key holds the value of the last commit to it up to A -- what it held at A. Its one
  check against state (the queue exists) passes on the replay whenever it passed at first,
  since topics only grow; and it always passed at first, because the leader checks the queue
  exists in its applied state before proposing (raft_write_path.commit_offsets), and that
  state is a prefix of the log before the record.
- ``ChangeAccess`` sets (grant) or clears (revoke) permission names of one rule: every name
  ends as the last change to it up to A left it, as at A.
Idempotent producers' sequences (``ProduceMarker``) are not store tables and are not carried:
they are rebuilt from the retained log, as after a restart (producer_table.py).

A leader that predates the control state sends none: the install then replaces the segments
alone and the follower keeps its own tables (logged by snapshot_transfer.py).
"""

from __future__ import annotations

import os

from raftlog.node.replication.raft_log_storage import RaftLogStorage, reset_log_to_snapshot
from raftlog.raft.types import ConfState, SnapshotMeta
from raftlog.store.atomic_file import read_file, read_json_document, write_json_document
from raftlog.store.checkpoint import checkpoint_path
from raftlog.store.consume_queue import CONSUME_QUEUE_DIR
from raftlog.store.control_state import (
    ControlState,
    decode_control_state,
    write_control_state_files,
)
from raftlog.store.filesystem import FileSystem
from raftlog.store.index_file import INDEX_DIR
from raftlog.store.message_store import COMMIT_LOG_DIR, MessageStore
from raftlog.store.segment import parse_segment_file_name

MARKER_FILE_NAME = "INSTALL"
CONTROL_STATE_FILE_NAME = "control_state.json"
# Version 1 markers written before the control state existed lack "control_state" (False).
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
    control_state = read_staged_control_state(fs, staging_dir)
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
            "control_state": control_state is not None,
        },
    )
    store.install_commit_log(staging_dir, end_physical_offset)
    if control_state is not None:
        store.replace_control_state(control_state)
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
    if marker.get("control_state", False):
        control_state = read_staged_control_state(fs, staging_dir)
        if control_state is None:
            raise ValueError(
                f"{staging_dir}: the install marker names a control state that is not staged"
            )
        write_control_state_files(fs, store_dir, control_state)
    meta = SnapshotMeta(
        int(marker["index"]),
        int(marker["term"]),
        ConfState(tuple(marker["voters"]), tuple(marker["learners"])),
    )
    reset_log_to_snapshot(fs, store_dir, meta, int(marker["end_physical_offset"]))
    fs.sync_dir(store_dir)
    discard_staging(fs, staging_dir)
    return True


def read_staged_control_state(fs: FileSystem, staging_dir: str) -> ControlState | None:
    """The control state staged with the segments, or None when the leader sent none;
    ValueError naming the file when it is not a valid document."""
    path = os.path.join(staging_dir, CONTROL_STATE_FILE_NAME)
    data = read_file(fs, path)
    if data is None:
        return None
    try:
        return decode_control_state(data)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error


def discard_staging(fs: FileSystem, staging_dir: str) -> None:
    """Remove the staging directory, its marker durably first: a marker that came back after
    a power loss (its removal not yet durable) would make the next start "finish" this
    install again, over the entries written since."""
    marker_path = os.path.join(staging_dir, MARKER_FILE_NAME)
    if fs.exists(marker_path):
        fs.remove(marker_path)
        fs.sync_dir(staging_dir)
    fs.remove_tree(staging_dir)
