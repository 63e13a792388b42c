"""The node's real Raft log storage, with every write mirrored onto a shadow ``SimDisk`` that
the checkers read.

Why a shadow: the checkers compare logs entry by entry after every step; reading them back
from the CommitLog each time would cost a decode per entry per step. The shadow holds the
same entries (the storage's own ``Entry`` objects) and the same hard state, and follows the
storage's durability promise: what was written before ``sync`` returned is "synced".

Rules this module keeps:
- The shadow never decides anything: the core reads the real storage, the handler writes the
  real storage, and the shadow records the same calls after they succeeded.
- At every restart the shadow is reset to what the files actually recovered to
  (``reset_shadow``), after checking the one promise the storage makes exactly: the term and
  vote it had synced survive a power loss (a vote must outlive the grant it was sent with).
  From then on the checkers see the real recovered log, so an entry the storage lost shows up
  as a Raft safety violation (committed entry lost, log matching, ...), not as a harness
  error.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.node.replication.raft_log_storage import RaftLogStorage
from raftlog.raft.types import ConfState, Entry, HardState, SnapshotMeta

from .checkers import SafetyViolation
from .disk import LogState, SimDisk


class ShadowedRaftLogStorage(RaftLogStorage):
    _shadow: SimDisk
    _images: dict[tuple[int, int], tuple[Entry, ...]]

    def attach_shadow(
        self, disk: SimDisk, images: dict[tuple[int, int], tuple[Entry, ...]]
    ) -> None:
        """Mirror onto ``disk``; ``images`` holds the log prefix of each staged snapshot."""
        self._shadow = disk
        self._images = images

    def append(self, entries: Sequence[Entry]) -> None:
        super().append(entries)
        if entries:
            self._shadow.append(list(entries))

    def set_hard_state(self, hard_state: HardState) -> None:
        super().set_hard_state(hard_state)
        self._shadow.set_hard_state(hard_state)

    def sync(self, flush_entries: bool = True) -> None:
        super().sync(flush_entries)
        self._shadow.sync()

    def apply_snapshot(self, meta: SnapshotMeta, end_physical_offset: int | None = None) -> None:
        image = self._images.pop((meta.index, meta.term), None)
        if image is None:
            raise AssertionError(f"snapshot ({meta.index}, {meta.term}) was never staged")
        super().apply_snapshot(meta, end_physical_offset)
        # The install is durable when it returns (snapshot_install.py): so is the shadow's.
        self._shadow.apply_snapshot(meta, image)
        self._shadow.sync()

    def compact(self, compact_index: int, conf_state: ConfState) -> None:
        super().compact(compact_index, conf_state)
        self._shadow.compact(compact_index, conf_state)


def reset_shadow(node_id: str, disk: SimDisk, storage: RaftLogStorage) -> None:
    """After a restart: check the synced term and vote survived, then make the shadow (current
    and synced) exactly what ``storage`` recovered."""
    hard_state, conf_state = storage.initial_state()
    promised = disk.synced.hard_state
    if (hard_state.term, hard_state.vote) != (promised.term, promised.vote):
        raise SafetyViolation(
            f"durability: {node_id} recovered term {hard_state.term} vote {hard_state.vote} "
            f"after syncing term {promised.term} vote {promised.vote}"
        )
    meta = storage.snapshot()
    first, last = storage.first_index(), storage.last_index()
    entries = storage.entries(first, last + 1, 1 << 62) if last >= first else []
    image = disk.synced.image[: meta.index]
    if len(image) != meta.index:
        raise SafetyViolation(
            f"durability: {node_id} recovered snapshot point {meta.index} past any it installed"
        )
    disk.reset_to(
        LogState(
            conf_state=conf_state,
            hard_state=hard_state,
            snapshot=meta if meta.index else None,
            image=image,
            entries=list(entries),
        )
    )
