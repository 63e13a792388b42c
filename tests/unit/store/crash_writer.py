"""Child process for test_crash.py: writes under SYNC_FLUSH until killed.

Usage: crash_writer.py <root_dir> <run_id> <seed>

Opens (and so recovers) the store, then appends batches across topics and queues forever,
printing one line per acknowledged message, flushed at once:
``ACK <topic> <queue_id> <queue_offset> <physical_offset> <msg_id> <key> <body_len>``.
The body of a message is ``expected_body(key, body_len)``, so the parent can check it.
"""

from __future__ import annotations

import random
import sys

from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.message_store import Message, MessageStore

TOPICS = ("orders", "payments", "audit")
QUEUE_COUNT = 3


def crash_config(root_dir: str) -> StoreConfig:
    # Small files so a run crosses segment, ConsumeQueue and index file boundaries.
    return StoreConfig(
        root_dir=root_dir,
        segment_size_bytes=16384,
        consume_queue_file_units=16,
        index_slot_count=64,
        index_entry_count=512,
        flush_mode=FlushMode.SYNC_FLUSH,
    )


def expected_body(key: str, body_len: int) -> bytes:
    pattern = (key + "|").encode()
    return (pattern * (body_len // len(pattern) + 1))[:body_len]


def main() -> None:
    root_dir, run_id, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    # Frequent checkpoints, so kills land before, during and after them.
    store = MessageStore.open(crash_config(root_dir), housekeeping_interval_ms=50)
    for topic in TOPICS:
        store.create_topic(topic, QUEUE_COUNT)
    print("READY", flush=True)
    sequence = 0
    while True:
        batch = []
        for _ in range(rng.randint(1, 6)):
            key = f"{run_id}-{sequence}"
            sequence += 1
            body_len = rng.choice((1, 40, 300, 2000))
            batch.append(
                Message(
                    rng.choice(TOPICS),
                    rng.randrange(QUEUE_COUNT),
                    expected_body(key, body_len),
                    keys=(key,),
                    uniq_key=f"U{key}",
                    tags=rng.choice(("", "a", "b")),
                )
            )
        results = store.put_messages(batch)
        lines = [
            f"ACK {m.topic} {m.queue_id} {r.queue_offset} {r.physical_offset} {r.msg_id} "
            f"{m.keys[0]} {len(m.body)}"
            for m, r in zip(batch, results, strict=True)
        ]
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
