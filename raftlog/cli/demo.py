"""The `make run` demonstration of the single-node store (until the replicated node lands).

It writes messages across topics and queues under SYNC_FLUSH, reads them back by queue
offset, filters by tag, looks messages up by key, by time and by offset message id, commits a
consumer offset, and prints what happened. Run it twice: the second run recovers the same
directory and keeps appending, so queue offsets continue where the first run stopped.
"""

from __future__ import annotations

import os
import time

from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.errors import StoreError
from raftlog.store.message_store import Message, MessageStore

TOPICS = {"orders": 4, "payments": 2, "audit": 1}
MESSAGES_PER_TOPIC = 12
CONSUMER_GROUP = "demo-group"


def run_store_demo(data_dir: str) -> None:
    root_dir = os.path.join(data_dir, "store")
    print(f"raftlog store demo: data in {os.path.abspath(root_dir)}")
    config = StoreConfig(
        root_dir=root_dir,
        flush_mode=FlushMode.SYNC_FLUSH,
        segment_size_bytes=1 << 20,
        index_slot_count=4096,
        index_entry_count=16384,
    )
    started_ms = int(time.time() * 1000)
    with MessageStore.open(config) as store:
        existing = {topic.name for topic in store.list_topics()}
        for topic, queue_count in TOPICS.items():
            if topic not in existing:
                store.create_topic(topic, queue_count)
        print(
            "topics:", ", ".join(f"{t.name} ({t.queue_count} queues)" for t in store.list_topics())
        )

        batch = [
            Message(
                topic=topic,
                queue_id=n % queue_count,
                body=f"{topic} message {n}".encode(),
                tags="even" if n % 2 == 0 else "odd",
                keys=(f"{topic}-{n}",),
            )
            for topic, queue_count in TOPICS.items()
            for n in range(MESSAGES_PER_TOPIC)
        ]
        results = store.put_messages(batch)
        print(f"wrote {len(results)} messages in one batch (fsynced before this line)")
        first = results[0]
        print(
            f"  first: queue offset {first.queue_offset}, physical offset "
            f"{first.physical_offset}, message id {first.msg_id}"
        )

        for topic, queue_count in TOPICS.items():
            for queue_id in range(queue_count):
                low = store.min_queue_offset(topic, queue_id)
                high = store.max_queue_offset(topic, queue_id)
                print(f"  {topic}/{queue_id}: queue offsets [{low}, {high})")

        _show_reads(store, first.msg_id, started_ms)
        try:
            store.put_message(Message(topic="bad topic!", queue_id=0, body=b"x"))
        except StoreError as error:
            print(f"bad input refused ({type(error).__name__}): {error}")
    print("closed cleanly; run again to see recovery continue the queue offsets")


def _show_reads(store: MessageStore, msg_id: str, started_ms: int) -> None:
    """Pull by committed offset and by tag, look up by key, id and time, commit an offset."""
    resume_at = store.fetch_consumer_offset(CONSUMER_GROUP, "orders", 0) or 0
    pulled = store.get_messages("orders", 0, queue_offset=resume_at, max_messages=5)
    print(f"pull orders/0 from {CONSUMER_GROUP}'s committed queue offset {resume_at}:")
    for record in pulled:
        print(f"  #{record.queue_offset} tags={record.tags} body={record.body.decode()}")

    odd = store.get_messages("orders", 1, queue_offset=0, max_messages=5, tag="odd")
    print(f"pull orders/1 with tag 'odd': {[r.body.decode() for r in odd]}")

    by_key = store.query_by_key("payments", "payments-3")
    print(f"query by key payments-3: {[r.body.decode() for r in by_key]}")

    by_id = store.get_by_message_id(msg_id)
    print(f"query by message id {msg_id}: {by_id.body.decode()}")

    from_time = store.queue_offset_for_time("audit", 0, started_ms)
    print(f"first audit/0 queue offset stored at or after this run began: {from_time}")

    store.commit_consumer_offset(CONSUMER_GROUP, "orders", 0, pulled.next_queue_offset)
    committed = store.fetch_consumer_offset(CONSUMER_GROUP, "orders", 0)
    print(f"consumer group {CONSUMER_GROUP} committed orders/0 at {committed}")
