"""The hard state file: absent means fresh, saves survive power loss, damage is an error."""

from __future__ import annotations

import random

import pytest

from raftlog.node.replication.hard_state_file import CorruptStateFileError, HardStateFile
from raftlog.raft.types import HardState
from tests.support.sim_filesystem import SimFileSystem

DIRECTORY = "/s/raftstate"
PATH = f"{DIRECTORY}/hard_state"


def test_absent_file_is_a_fresh_hard_state() -> None:
    assert HardStateFile(SimFileSystem(), DIRECTORY).load() == HardState()


@pytest.mark.parametrize(
    "hard_state",
    [HardState(3, "node-b", 17), HardState(1, None, 0), HardState(2**40, "é" * 30, 2**39)],
)
def test_save_is_durable_across_power_loss(hard_state: HardState) -> None:
    fs = SimFileSystem()
    HardStateFile(fs, DIRECTORY).save(HardState(1, "x", 0))
    HardStateFile(fs, DIRECTORY).save(hard_state)
    fs.power_loss(random.Random(1))
    assert HardStateFile(fs, DIRECTORY).load() == hard_state


def test_crash_during_save_leaves_old_or_new() -> None:
    for seed in range(30):
        fs = SimFileSystem()
        file = HardStateFile(fs, DIRECTORY)
        old, new = HardState(4, "a", 2), HardState(5, "b", 3)
        file.save(old)
        # A save interrupted before its rename was made durable: only its temp file changes.
        fs.open(PATH + ".tmp").pwrite(b"garbage", 0)
        fs.power_loss(random.Random(seed))
        assert HardStateFile(fs, DIRECTORY).load() in (old, new)


def test_every_single_byte_corruption_is_an_error() -> None:
    fs = SimFileSystem()
    HardStateFile(fs, DIRECTORY).save(HardState(9, "node-c", 4))
    size = fs.file_size(PATH)
    original = fs.read_bytes(PATH)
    for position in range(size):
        fs.corrupt(PATH, position, bytes([original[position] ^ 0x40]))
        with pytest.raises(CorruptStateFileError):
            HardStateFile(fs, DIRECTORY).load()
        fs.corrupt(PATH, position, original[position : position + 1])
    assert HardStateFile(fs, DIRECTORY).load() == HardState(9, "node-c", 4)


def test_truncated_file_is_an_error() -> None:
    fs = SimFileSystem()
    HardStateFile(fs, DIRECTORY).save(HardState(9, "node-c", 4))
    handle = fs.open(PATH)
    handle.truncate(10)
    handle.sync()
    with pytest.raises(CorruptStateFileError):
        HardStateFile(fs, DIRECTORY).load()
