"""The checks every WritePath makes before it writes, shared by both replication modes (the
Raft write path and the master-slave one refuse exactly the same requests, with the same
messages).

Rules this module keeps: each check raises the store's validation error (a gRPC
INVALID_ARGUMENT or NOT_FOUND) and writes nothing; none of them knows how the write is
replicated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from raftlog.node.control import is_reserved_topic
from raftlog.store.errors import InvalidOffsetError, InvalidQueueIdError, InvalidTopicError
from raftlog.store.message_store import BlockEntry, MessageStore
from raftlog.store.topic_config import MAX_QUEUE_COUNT, TopicConfig
from raftlog.store.validation import validate_topic


def refuse_reserved(topics: Iterable[str]) -> None:
    """A user may not write to the node's own topics."""
    for topic in topics:
        if is_reserved_topic(topic):
            raise InvalidTopicError(f"topic {topic!r} is reserved for raftlog's own use")


def check_encoded_topics(topic: str, entries: Sequence[BlockEntry]) -> None:
    """Every pre-encoded record names the request's topic, and it is not a reserved one."""
    for (record_topic, _), _ in entries:
        if record_topic != topic:
            raise InvalidTopicError(
                f"a record names topic {record_topic!r}; the request is for {topic!r}"
            )
    refuse_reserved([topic])


def check_offsets(store: MessageStore, offsets: Sequence[tuple[str, int, int]]) -> None:
    """Each (topic, queue_id, next_queue_offset) names a queue that exists, with an offset
    that can be one (NotFound for an unknown topic)."""
    for topic, queue_id, queue_offset in offsets:
        queue_count = store.describe_topic(topic).queue_count
        if not 0 <= queue_id < queue_count:
            raise InvalidQueueIdError(
                f"queue id {queue_id} is not below topic {topic!r}'s {queue_count} queues"
            )
        if queue_offset < 0:
            raise InvalidOffsetError(f"queue offset must be >= 0, got {queue_offset}")


def check_new_topic(store: MessageStore, topic: str, queue_count: int) -> None:
    """The name and queue count are ones a topic may have."""
    refuse_reserved([topic])
    validate_topic(topic, store.limits)
    if not 1 <= queue_count <= MAX_QUEUE_COUNT:
        raise InvalidQueueIdError(f"queue count must be 1..{MAX_QUEUE_COUNT}, got {queue_count}")


def existing_topic(store: MessageStore, topic: str, queue_count: int) -> TopicConfig | None:
    """The topic when it already exists with this queue count (nothing to do), None when it
    must be created or grown; a smaller queue count than it has is refused."""
    existing = {t.name: t for t in store.list_topics()}.get(topic)
    if existing is None or queue_count > existing.queue_count:
        return None
    if queue_count < existing.queue_count:
        raise InvalidQueueIdError(
            f"topic {topic!r} has {existing.queue_count} queues; cannot shrink to {queue_count}"
        )
    return existing
