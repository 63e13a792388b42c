"""A schedule topic record's ConsumeQueue unit holds its delivery time instead of a tag hash
(store/hashing.py ``unit_tag_hash``), whether dispatch takes the writer's hints or reads the
record back from the CommitLog (a follower, a recovery)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from raftlog.store.config import StoreConfig
from raftlog.store.hashing import PROPERTY_DELIVER_MS, SCHEDULE_TOPIC, tag_hash, unit_tag_hash
from raftlog.store.message_store import Message, MessageStore


def open_store(root: Path) -> MessageStore:
    return MessageStore.open(StoreConfig(root_dir=str(root)), housekeeping_interval_ms=None)


def test_unit_tag_hash_rule() -> None:
    deliver = ((PROPERTY_DELIVER_MS, "1700000000123"),)
    assert unit_tag_hash("orders", "TagA", deliver) == tag_hash("TagA")
    assert unit_tag_hash(SCHEDULE_TOPIC, "TagA", deliver) == 1_700_000_000_123
    assert unit_tag_hash(SCHEDULE_TOPIC, "TagA", None) == 0
    assert unit_tag_hash(SCHEDULE_TOPIC, "", ((PROPERTY_DELIVER_MS, "soon"),)) == 0
    assert unit_tag_hash(SCHEDULE_TOPIC, "", ((PROPERTY_DELIVER_MS, "²"),)) == 0


def test_schedule_units_hold_the_delivery_time(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root) as store:
        store.create_topic(SCHEDULE_TOPIC, 3)
        store.create_topic("orders", 1)
        store.put_messages(
            [
                Message(
                    SCHEDULE_TOPIC, 2, b"a", tags="TagA", properties=((PROPERTY_DELIVER_MS, "5"),)
                ),
                Message(SCHEDULE_TOPIC, 2, b"b", properties=((PROPERTY_DELIVER_MS, "7"),)),
                Message("orders", 0, b"c", tags="TagA"),
            ]
        )
        written = [u.tag_hash for u in store.read_units(SCHEDULE_TOPIC, 2, 0, 10)]
        assert written == [5, 7]
        assert store.read_units("orders", 0, 0, 10)[0].tag_hash == tag_hash("TagA")
    # Dispatch again from the CommitLog alone (the path a follower and a recovery take).
    shutil.rmtree(root / "consumequeue")
    os.remove(root / "checkpoint")
    with open_store(root) as store:
        assert [u.tag_hash for u in store.read_units(SCHEDULE_TOPIC, 2, 0, 10)] == [5, 7]
        assert store.read_units("orders", 0, 0, 10)[0].tag_hash == tag_hash("TagA")
