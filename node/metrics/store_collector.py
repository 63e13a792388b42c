"""StoreCollector: what the node's store holds, read each time Prometheus scrapes: CommitLog
bytes, segments and write position, each queue's min and max offset, and each consumer
group's committed offset and lag per queue.

Rules this module keeps: reads only what the store already keeps (no bookkeeping on the write
path); the node's own reserved topics are left out (they are not a user's queues); a
committed offset whose queue is gone (topic deleted or shrunk) is skipped, not an error; lag is
max offset minus committed offset, never below 0 (a follower's queue may trail the offsets it
applied).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raftlog.node.messaging.retry import is_node_topic
from raftlog.store.message_store import MessageStore

_QUEUE_LABELS = ("topic", "queue")
_GROUP_LABELS = ("group", "topic", "queue")


def _families() -> dict[str, GaugeMetricFamily]:
    specs = {
        "raftlog_store_commitlog_bytes": ("CommitLog bytes held, oldest segment to end", ()),
        "raftlog_store_commitlog_segments": ("CommitLog segment files", ()),
        "raftlog_store_commitlog_max_offset_bytes": (
            "The CommitLog's write position (its rate is the append rate)",
            (),
        ),
        "raftlog_queue_min_offset": ("A queue's first live offset", _QUEUE_LABELS),
        "raftlog_queue_max_offset": ("One past a queue's last visible offset", _QUEUE_LABELS),
        "raftlog_consumer_group_offset": (
            "A group's committed next offset in a queue",
            _GROUP_LABELS,
        ),
        "raftlog_consumer_group_lag_messages": (
            "A queue's max offset minus the group's committed offset",
            _GROUP_LABELS,
        ),
    }
    return {
        name: GaugeMetricFamily(name, text, labels=list(labels))
        for name, (text, labels) in specs.items()
    }


class StoreCollector(Collector):
    def __init__(self, store: MessageStore) -> None:
        self._store = store

    def describe(self) -> Iterable[Metric]:
        return list(_families().values())

    def collect(self) -> Iterable[Metric]:
        families = _families()
        commit_log = self._store.commit_log
        end_bytes = commit_log.max_offset
        families["raftlog_store_commitlog_bytes"].add_metric([], end_bytes - commit_log.min_offset)
        families["raftlog_store_commitlog_segments"].add_metric([], commit_log.segment_count)
        families["raftlog_store_commitlog_max_offset_bytes"].add_metric([], end_bytes)
        max_offsets = self._queues(families)
        self._groups(families, max_offsets)
        return list(families.values())

    def _queues(self, families: dict[str, GaugeMetricFamily]) -> dict[tuple[str, int], int]:
        """Add each queue's offsets; returns the max offsets by (topic, queue id)."""
        store = self._store
        max_offsets: dict[tuple[str, int], int] = {}
        for config in store.list_topics():
            if is_node_topic(config.name):
                continue
            for queue_id in range(config.queue_count):
                labels = [config.name, str(queue_id)]
                highest = store.max_queue_offset(config.name, queue_id)
                max_offsets[config.name, queue_id] = highest
                families["raftlog_queue_max_offset"].add_metric(labels, highest)
                lowest = store.min_queue_offset(config.name, queue_id)
                families["raftlog_queue_min_offset"].add_metric(labels, lowest)
        return max_offsets

    def _groups(
        self, families: dict[str, GaugeMetricFamily], max_offsets: dict[tuple[str, int], int]
    ) -> None:
        for (group, topic, queue_id), committed in sorted(self._store.consumer_offsets().items()):
            highest = max_offsets.get((topic, queue_id))
            if highest is None:
                continue
            labels = [group, topic, str(queue_id)]
            families["raftlog_consumer_group_offset"].add_metric(labels, committed)
            lag = max(0, highest - committed)
            families["raftlog_consumer_group_lag_messages"].add_metric(labels, lag)
