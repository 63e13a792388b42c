"""Progress: what the leader knows about one follower's log, and how it sends to it.

States (etcd-io/raft):
- PROBE: the leader does not know where the follower's log matches; it sends one APPEND and
  waits for its answer (or the next heartbeat answer) before sending another.
- REPLICATE: the logs match up to ``match_index``; the leader streams APPENDs optimistically
  (``next_index`` jumps past what it sent), at most ``max_inflight_appends`` unanswered.
- SNAPSHOT: the follower needs compacted entries; nothing is sent until the snapshot is
  reported done (``report_snapshot``) or the follower acknowledges the snapshot's index.

Rules this module keeps: ``match_index < next_index``; ``match_index`` never decreases; the
inflight window holds increasing last-indexes of unanswered APPENDs and never exceeds its size.
"""

from __future__ import annotations

import enum
from collections import deque


class ProgressState(enum.IntEnum):
    PROBE = 0
    REPLICATE = 1
    SNAPSHOT = 2


class Inflights:
    """The last indexes of APPENDs sent but not yet acknowledged, oldest first."""

    def __init__(self, capacity: int) -> None:
        assert capacity >= 1
        self.capacity = capacity
        self._last_indexes: deque[int] = deque()

    def add(self, last_index: int) -> None:
        assert not self.full(), "sending beyond the inflight window"
        assert not self._last_indexes or last_index > self._last_indexes[-1]
        self._last_indexes.append(last_index)

    def free_le(self, index: int) -> None:
        """An acknowledgement up to ``index`` frees every APPEND that ended at or before it."""
        while self._last_indexes and self._last_indexes[0] <= index:
            self._last_indexes.popleft()

    def free_first_one(self) -> None:
        if self._last_indexes:
            self._last_indexes.popleft()

    def full(self) -> bool:
        return len(self._last_indexes) >= self.capacity

    def count(self) -> int:
        return len(self._last_indexes)

    def reset(self) -> None:
        self._last_indexes.clear()


class Progress:
    def __init__(self, next_index: int, max_inflight_appends: int, is_learner: bool) -> None:
        assert next_index >= 1
        self.match_index = 0
        self.next_index = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        """PROBE: an APPEND is out; send no other until an answer or a heartbeat answer."""
        self.pending_snapshot_index = 0
        """SNAPSHOT: the index of the snapshot sent."""
        self.recent_active = False
        """Heard from since the last check-quorum round."""
        self.is_learner = is_learner
        self.inflights = Inflights(max_inflight_appends)

    def _reset_state(self, state: ProgressState) -> None:
        self.probe_sent = False
        self.pending_snapshot_index = 0
        self.state = state
        self.inflights.reset()

    def become_probe(self) -> None:
        if self.state == ProgressState.SNAPSHOT:
            # Resume after the snapshot if it was installed; otherwise just after match.
            pending_snapshot_index = self.pending_snapshot_index
            self._reset_state(ProgressState.PROBE)
            self.next_index = max(self.match_index + 1, pending_snapshot_index + 1)
        else:
            self._reset_state(ProgressState.PROBE)
            self.next_index = self.match_index + 1

    def become_replicate(self) -> None:
        self._reset_state(ProgressState.REPLICATE)
        self.next_index = self.match_index + 1

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset_state(ProgressState.SNAPSHOT)
        self.pending_snapshot_index = snapshot_index

    def maybe_update(self, index: int) -> bool:
        """An acknowledgement that the follower matches up to ``index``. False if stale."""
        updated = False
        if self.match_index < index:
            self.match_index = index
            updated = True
            self.probe_sent = False
        self.next_index = max(self.next_index, index + 1)
        return updated

    def maybe_decrease_to(self, rejected_index: int, match_hint_index: int) -> bool:
        """A rejection of the APPEND whose previous index was ``rejected_index``; the follower
        hints its log matches at most up to ``match_hint_index``. False if the rejection is
        stale (answers an APPEND the leader has already moved past)."""
        if self.state == ProgressState.REPLICATE:
            if rejected_index <= self.match_index:
                return False
            # Stream from just after the known match; the next probe finds the real point.
            self.next_index = self.match_index + 1
            return True
        if self.next_index - 1 != rejected_index:
            return False
        self.next_index = max(min(rejected_index, match_hint_index + 1), self.match_index + 1)
        self.probe_sent = False
        return True

    def sent_entries(self, last_index: int) -> None:
        """An APPEND carrying entries up to ``last_index`` was sent."""
        if self.state == ProgressState.REPLICATE:
            self.next_index = last_index + 1
            self.inflights.add(last_index)
        elif self.state == ProgressState.PROBE:
            self.probe_sent = True

    def is_paused(self) -> bool:
        if self.state == ProgressState.PROBE:
            return self.probe_sent
        if self.state == ProgressState.REPLICATE:
            return self.inflights.full()
        return True
