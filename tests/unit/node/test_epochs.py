"""Master epochs: the history file (atomic, validated) and the last point two replicas'
logs agree on, in the cases RocketMQ's controller mode meets: the same master, a deposed
master with an unreplicated tail, a slave that missed a whole epoch, no common epoch."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.node.masterslave.epochs import (
    EPOCH_FILE,
    FIRST_EPOCH,
    EpochEntry,
    EpochHistory,
    EpochHistoryError,
    consistent_offset,
)

E = EpochEntry


def test_history_survives_a_reload_and_refuses_going_backwards(tmp_path: Path) -> None:
    history = EpochHistory.load(str(tmp_path))
    assert history.entries == [FIRST_EPOCH]
    history.begin(1, 500)
    history.begin(1, 500)  # idempotent
    history.begin(3, 900)
    assert EpochHistory.load(str(tmp_path)).entries == [E(0, 0), E(1, 500), E(3, 900)]
    with pytest.raises(EpochHistoryError):
        history.begin(2, 1000)
    history.truncate(700)
    assert EpochHistory.load(str(tmp_path)).entries == [E(0, 0), E(1, 500)]


@pytest.mark.parametrize("text", ["{", '{"entries": []}', '{"entries": [[2, 5], [1, 9]]}'])
def test_a_damaged_file_is_an_error_not_a_reset(tmp_path: Path, text: str) -> None:
    (tmp_path / EPOCH_FILE).write_text(text)
    with pytest.raises(EpochHistoryError, match=EPOCH_FILE):
        EpochHistory.load(str(tmp_path))


def test_consistent_offsets() -> None:
    # Static mode: one epoch; the shorter log decides.
    assert consistent_offset([E(0, 0)], 800, [E(0, 0)], 1000) == 800
    assert consistent_offset([E(0, 0)], 1200, [E(0, 0)], 1000) == 1000
    # A deposed master wrote 1000..1300 in epoch 1 that nobody copied; epoch 2 began at 1000.
    old = [E(0, 0), E(1, 500)]
    new = [E(0, 0), E(1, 500), E(2, 1000)]
    assert consistent_offset(old, 1300, new, 1800) == 1000
    # A slave that missed epoch 2 entirely but holds epoch 1 up to 900.
    assert consistent_offset(old, 900, [E(0, 0), E(1, 500), E(2, 1000), E(3, 1500)], 2000) == 900
    # Same epoch number, different start: not the same epoch; fall back to the older one.
    assert consistent_offset([E(0, 0), E(1, 600)], 700, new, 1800) == 500
    # Nothing in common: copy everything.
    assert consistent_offset([E(5, 0)], 100, [E(6, 0)], 100) == 0
