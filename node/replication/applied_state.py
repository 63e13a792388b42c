"""The applied-state checkpoint: where a member's Raft loop stands -- its applied index and the
state it built in memory by applying entries -- so a restart applies only the entries after
it, instead of every entry since the snapshot point (``<root>/raftstate/applied_state``).

Without it a restart re-read, re-verified and re-applied the whole retained log (about 1.2 s
per GiB on the bench machine, and more the more consumer-offset commits it held: each one
rewrites the offsets file), and the Raft core read every entry back once more to find the
configuration changes in it.

What it holds, all as of one applied index A (``capture``, on the Raft loop between Readies):
- A and the term of entry A: the checkpoint is used only while the log still holds entry A
  with that term, or A is the snapshot point itself (retention compacts to an applied entry);
  a snapshot installed or retention past A makes it stale: it is then ignored and the node
  replays from the snapshot point, as without it;
- the membership as of A (raft ``Config.applied_conf_state``: the core reads no entry back);
- the tables that exist only in memory: the idempotent producers' (producer_table.py) and the
  delay scheduler's (messaging/schedule_table.py). Whoever adds state built by applying
  entries adds it here too, or it is lost on restart.

What it does not hold, and why that is sound: the store's replicated tables (topics, consumer
offsets, access rules) are written durably by the store as each command is applied
(``apply_to_store``), so at any time after ``capture`` their files hold the state at A or
later, and re-applying entries after A to a later state changes nothing (the idempotence
argument of snapshot_install.py). ConsumeQueues and IndexFiles follow the store's own
checkpoint: on restore the store dispatches from it up to the end of entry A.

Rules this module keeps: the file is replaced atomically with a CRC (``write_checked_file``);
a missing, stale or damaged checkpoint means "replay from the snapshot point" (a damaged one
is logged), never a refusal to start.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Protocol

from raftlog.node.messaging.schedule_table import ScheduleTable
from raftlog.node.replication.hard_state_file import (
    CorruptStateFileError,
    read_checked_file,
    write_checked_file,
)
from raftlog.node.replication.producer_table import ProducerTable
from raftlog.raft.types import ConfState, LogCompactedError, LogUnavailableError
from raftlog.store.filesystem import FileSystem

_log = logging.getLogger(__name__)

APPLIED_STATE_FILE_NAME = "applied_state"
_MAGIC = 0x41505354  # "APST"
_VERSION = 1


@dataclass(frozen=True, slots=True)
class AppliedState:
    index: int
    term: int
    conf_state: ConfState
    # ProducerTable.export() and ScheduleTable.export(): JSON values.
    producers: object
    schedule: object


class _Log(Protocol):
    """What ``usable`` asks of the Raft log (RaftLogStorage)."""

    def first_index(self) -> int: ...
    def last_index(self) -> int: ...
    def term(self, index: int) -> int: ...


def encode(state: AppliedState) -> bytes:
    return json.dumps(
        {
            "version": _VERSION,
            "index": state.index,
            "term": state.term,
            "voters": list(state.conf_state.voters),
            "learners": list(state.conf_state.learners),
            "producers": state.producers,
            "schedule": state.schedule,
        },
        separators=(",", ":"),
    ).encode()


def decode(body: bytes) -> AppliedState:
    """ValueError when ``body`` is not an encoded AppliedState of this version."""
    try:
        fields = json.loads(body)
        if fields["version"] != _VERSION:
            raise ValueError(f"version {fields['version']!r}, not {_VERSION}")
        return AppliedState(
            int(fields["index"]),
            int(fields["term"]),
            ConfState(
                tuple(str(v) for v in fields["voters"]), tuple(str(v) for v in fields["learners"])
            ),
            fields["producers"],
            fields["schedule"],
        )
    except (KeyError, TypeError, json.JSONDecodeError) as error:
        raise ValueError(f"malformed applied state: {error!r}") from error


def save(fs: FileSystem, path: str, state: AppliedState) -> None:
    """Replace the checkpoint at ``path`` durably and atomically."""
    fs.makedirs(os.path.dirname(path))
    write_checked_file(fs, path, _MAGIC, encode(state))


def load(fs: FileSystem, path: str) -> AppliedState | None:
    """The checkpoint at ``path``; None when there is none or it is damaged (logged)."""
    try:
        body = read_checked_file(fs, path, _MAGIC)
        return None if body is None else decode(body)
    except (CorruptStateFileError, ValueError) as error:
        _log.warning("ignoring the applied-state checkpoint %s: %s", path, error)
        return None


def usable(state: AppliedState | None, raft_log: _Log) -> AppliedState | None:
    """``state`` when the log still holds its entry with its term (or it is the snapshot
    point, with the point's term), and its tables are well formed; else None (replay from
    the snapshot point)."""
    if state is None:
        return None
    if not raft_log.first_index() - 1 <= state.index <= raft_log.last_index():
        return None
    try:
        if raft_log.term(state.index) != state.term:
            return None
    except (LogCompactedError, LogUnavailableError):
        return None
    try:
        ProducerTable(0).restore(state.producers)
        ScheduleTable().restore(state.schedule)
    except ValueError as error:
        _log.warning("ignoring the applied-state checkpoint at index %d: %s", state.index, error)
        return None
    return state
