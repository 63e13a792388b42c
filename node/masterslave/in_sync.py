"""InSyncSet: which slaves a master counts on, and the offset its group has confirmed.

A slave is *in sync* while its stream is open, it lags the master by at most
``max_gap_bytes`` and it caught up (held everything the master had) within ``max_lag_ms``:
RocketMQ's ``haMaxGapNotInSync`` and ``haMaxTimeSlaveNotCatchup``. The *confirmed offset* is
the highest offset held by ``needed`` replicas, the master counted as one of them, so a
SYNC_MASTER acknowledges a write once the confirmed offset passes its end.

Rules this module keeps: pure and clock-free (every call passes ``now_ms``); an acknowledged
offset never goes backwards for a live stream (a report below the last one is ignored, since a
slave never un-stores bytes without reconnecting); a slave that disconnects is forgotten
until it reports again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SlaveProgress:
    """What the master knows of one slave. ``caught_up_at_ms`` is when the slave last held
    everything the master had (None: not yet since it connected)."""

    node_id: str
    acked_offset: int
    connected_at_ms: int
    caught_up_at_ms: int | None


@dataclass(frozen=True, slots=True)
class SlaveLag:
    """One slave as ``raftlog cluster status`` shows it."""

    node_id: str
    acked_offset: int
    lag_bytes: int
    lag_ms: int
    in_sync: bool


class InSyncSet:
    def __init__(self, needed: int, max_gap_bytes: int, max_lag_ms: int) -> None:
        if needed < 1:
            raise ValueError(f"needed must be >= 1, got {needed}")
        self.needed = needed
        self._max_gap_bytes = max_gap_bytes
        self._max_lag_ms = max_lag_ms
        self._slaves: dict[str, SlaveProgress] = {}

    def report(
        self, node_id: str, acked_offset: int, sent_end_offset: int, sent_at_ms: int
    ) -> None:
        """``node_id`` holds everything below ``acked_offset``; the last chunk sent to it
        went out at ``sent_at_ms`` when the master's log ended at ``sent_end_offset``. Holding
        that end counts as caught up *at the send time* (RocketMQ's rule: under a steady load
        a slave is never level with the master's current end, only with what it was sent)."""
        progress = self._slaves.get(node_id)
        if progress is None:
            progress = SlaveProgress(node_id, acked_offset, sent_at_ms, None)
            self._slaves[node_id] = progress
        progress.acked_offset = max(progress.acked_offset, acked_offset)
        if progress.acked_offset >= sent_end_offset:
            progress.caught_up_at_ms = max(progress.caught_up_at_ms or sent_at_ms, sent_at_ms)

    def acked(self, node_id: str) -> int:
        """What ``node_id`` holds as far as the master knows (0 when it is not connected)."""
        progress = self._slaves.get(node_id)
        return progress.acked_offset if progress is not None else 0

    def disconnect(self, node_id: str) -> None:
        self._slaves.pop(node_id, None)

    def _is_in_sync(self, progress: SlaveProgress, master_offset: int, now_ms: int) -> bool:
        if progress.caught_up_at_ms is None:
            return False
        if master_offset - progress.acked_offset > self._max_gap_bytes:
            return False
        if progress.acked_offset >= master_offset:
            return True
        return now_ms - progress.caught_up_at_ms <= self._max_lag_ms

    def in_sync(self, master_offset: int, now_ms: int) -> list[str]:
        """The in-sync slaves' ids, sorted."""
        return sorted(
            node_id
            for node_id, progress in self._slaves.items()
            if self._is_in_sync(progress, master_offset, now_ms)
        )

    def confirmed_offset(self, master_offset: int, now_ms: int) -> int:
        """The highest offset ``needed`` replicas hold (the master holds ``master_offset``);
        0 when fewer than ``needed`` replicas are in sync."""
        held = [master_offset] + [
            min(progress.acked_offset, master_offset)
            for progress in self._slaves.values()
            if self._is_in_sync(progress, master_offset, now_ms)
        ]
        if len(held) < self.needed:
            return 0
        held.sort(reverse=True)
        return held[self.needed - 1]

    def can_confirm(self, master_offset: int, now_ms: int) -> bool:
        """Whether enough slaves are in sync for a write to be confirmed at all."""
        return 1 + len(self.in_sync(master_offset, now_ms)) >= self.needed

    def lags(self, master_offset: int, now_ms: int) -> list[SlaveLag]:
        """Every connected slave's lag, sorted by id: bytes behind the master's end, and how
        long since it last held everything (0 when it holds it now)."""
        lags = []
        for node_id, progress in sorted(self._slaves.items()):
            behind = max(0, master_offset - progress.acked_offset)
            since = progress.caught_up_at_ms
            lag_ms = (
                0
                if behind == 0
                else now_ms - (since if since is not None else progress.connected_at_ms)
            )
            in_sync = self._is_in_sync(progress, master_offset, now_ms)
            lags.append(SlaveLag(node_id, progress.acked_offset, behind, max(0, lag_ms), in_sync))
        return lags
