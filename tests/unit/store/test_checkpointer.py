"""The checkpointer (store/checkpointer.py): periodic checkpoints make derived data durable
only when due, every checkpoint records only what holds, and a cut below the record lowers it
first, so a power loss after a Raft truncation brings back no stale ConsumeQueue unit."""

from __future__ import annotations

import random

import pytest

from raftlog.store.checkpoint import Checkpoint, load_checkpoint
from raftlog.store.checkpointer import Checkpointer
from raftlog.store.message_store import Message
from tests.support.sim_filesystem import SimFileSystem
from tests.unit.store.test_message_store import T0, open_store

ROOT = "/store"


def checkpointer(interval_ms: int, recorded: Checkpoint | None = None) -> Checkpointer:
    fs = SimFileSystem()
    fs.makedirs(ROOT)
    return Checkpointer(fs, ROOT, recorded, interval_ms, lambda: T0)


def test_derived_data_is_due_when_writes_pause_not_while_they_go_on() -> None:
    keeper = checkpointer(interval_ms=60_000)
    assert not keeper.derived_due(0)  # nothing dispatched at all
    assert not keeper.derived_due(100)  # dispatch moving, interval not passed
    assert not keeper.derived_due(200)
    assert keeper.derived_due(200)  # stood still since the previous check
    keeper.record(flushed=200, dispatched=200)
    assert not keeper.derived_due(200)  # nothing new since that derived flush


def test_derived_data_is_due_once_the_interval_passed() -> None:
    keeper = checkpointer(interval_ms=0)
    assert keeper.derived_due(100)
    assert keeper.derived_due(200)


def test_a_light_record_keeps_the_dispatched_offset_of_the_last_derived_flush() -> None:
    keeper = checkpointer(interval_ms=60_000)
    keeper.record(flushed=300, dispatched=250)
    light = keeper.record(flushed=900, dispatched=None)
    assert (light.flushed_physical_offset, light.dispatched_physical_offset) == (900, 250)
    assert load_checkpoint(keeper._fs, ROOT) == light


def test_lower_saves_only_when_the_record_vouches_for_more() -> None:
    recorded = Checkpoint(900, 700, T0, T0)
    keeper = checkpointer(interval_ms=60_000, recorded=recorded)
    keeper.lower(1000, 800)
    assert load_checkpoint(keeper._fs, ROOT) is None  # nothing to lower: no write
    keeper.lower(500, 500)
    lowered = load_checkpoint(keeper._fs, ROOT)
    assert lowered is not None and keeper.recorded == lowered
    assert (lowered.flushed_physical_offset, lowered.dispatched_physical_offset) == (500, 500)


def test_periodic_checkpoints_sync_queues_only_when_due_and_recover_every_write(
    tmp_path,
) -> None:
    fs = SimFileSystem()
    store = open_store(tmp_path, fs, consume_queue_flush_interval_ms=60_000)
    store.create_topic("t", 3)
    store.put_messages([Message("t", i % 3, b"a%d" % i) for i in range(30)])
    store.periodic_checkpoint()  # dispatch moved since open: not due yet
    first = store.put_messages([Message("t", i % 3, b"b%d" % i) for i in range(30)])
    light = store.periodic_checkpoint()
    assert light.flushed_physical_offset == store.commit_log.max_offset
    assert light.dispatched_physical_offset == 0
    paused = store.periodic_checkpoint()  # writes paused: the derived flush runs
    assert paused.dispatched_physical_offset == store.commit_log.max_offset
    store.put_messages([Message("t", i % 3, b"c%d" % i) for i in range(30)])
    moving = store.periodic_checkpoint()
    assert moving.dispatched_physical_offset == paused.dispatched_physical_offset
    fs.power_loss(random.Random(7))
    store._store_lock.release()  # the process "died": the OS drops its lock
    store = open_store(tmp_path, fs)
    for queue_id in range(3):
        got = [m.body for m in store.get_messages("t", queue_id, 0, 100).messages]
        rounds = (b"a", b"b", b"c")
        assert got == [b"%s%d" % (p, i) for p in rounds for i in range(30) if i % 3 == queue_id]
    assert first[0].queue_offset == 10
    store.close()


@pytest.mark.parametrize("seed", range(8))
def test_a_truncation_below_the_checkpoint_survives_power_loss(tmp_path, seed: int) -> None:
    fs = SimFileSystem()
    store = open_store(tmp_path, fs)
    store.create_topic("t", 2)
    old = store.put_messages(
        [Message("t", i % 2, b"old%d" % i, keys=(f"k{i}",)) for i in range(20)]
    )
    store.checkpoint()  # vouches for all 20, units and index entries included
    store.truncate_after(old[6].physical_offset)
    for i in range(6, 12):  # other bodies, other sizes, at the same places
        store.put_message(Message("t", i % 2, b"new-%d" % i, keys=(f"k{i}",)))
    fs.power_loss(random.Random(seed))
    store._store_lock.release()
    store = open_store(tmp_path, fs)
    for queue_id in range(2):
        want = [b"old%d" % i for i in range(6) if i % 2 == queue_id]
        want += [b"new-%d" % i for i in range(6, 12) if i % 2 == queue_id]
        assert [m.body for m in store.get_messages("t", queue_id, 0, 100).messages] == want
        assert store.max_queue_offset("t", queue_id) == len(want)
    assert [m.body for m in store.query_by_key("t", "k9", 0, 2 * T0)] == [b"new-9"]
    store.close()
