"""GroupCoordinator: Consumer.Heartbeat, LockQueues and UnlockQueues (client.proto), the
leader's side of clustering and orderly consumption (docs/messaging.md "Clustering and
rebalance", "Ordered messages").

Rules this module keeps:
- Served by the leader only, from memory: the live members (node/messaging/group_members.py)
  and the queue locks (node/messaging/queue_lock_table.py). A member that is not the leader
  answers "not leader" (the client follows the redirect) and forgets both tables.
- A leadership is told apart by its term (master-slave: epoch): the first call this node
  serves as leader of a new term empties both tables and starts the lock table's wait (one
  lease, during which no lock is granted); heartbeats answer ``warming_up`` for
  ``WARM_UP_INTERVALS`` of the asker's interval after that moment, while the members that
  have not yet sent this leader a heartbeat are missing from its answers.
- A lock is granted only after the leader confirmed, after the request arrived, that it
  still leads (a linearizable read of no offsets: a read-index round), and only if the term
  did not change meanwhile (a new term restarts the wait); queue_lock_table.py says why
  that keeps one holder per queue across a failover.
- Stateless checks first: a malformed group, client id, topic, queue id or interval is
  INVALID_ARGUMENT (with what is wrong) before any table is touched; an unknown topic or
  queue of a lock is NOT_FOUND; a full table RESOURCE_EXHAUSTED naming its setting.
- Thread-safe: one mutex over both tables, never held across the read-index round.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Sequence

from raftlog.node.errors import InvalidRequestError, NotLeaderError
from raftlog.node.messaging.group_members import GroupMembers
from raftlog.node.messaging.queue_lock_table import QueueLockTable
from raftlog.node.services.limits import ServiceLimits
from raftlog.node.services.wire import (
    require_group_name,
    require_non_negative,
    require_topic_name,
)
from raftlog.node.write_checks import check_offsets
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2
from raftlog.store.message_store import MessageStore

# The same characters a broadcast member's client id may have (client/local_offsets.py).
CLIENT_ID_PATTERN = re.compile(r"[A-Za-z0-9._@:%|-]{1,128}")
MAX_HEARTBEAT_TOPICS = 64
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
MIN_HEARTBEAT_INTERVAL_MS = 100
MAX_HEARTBEAT_INTERVAL_MS = 300_000
# A new leader's member list is complete once every live member sent it a heartbeat: within
# one interval, plus a failed try during the election retried (the client retries within a
# second); two intervals cover both.
WARM_UP_INTERVALS = 2.0


class GroupCoordinator:
    """Serves the three group calls over one store and write path (see the module)."""

    def __init__(
        self,
        store: MessageStore,
        write_path: WritePath,
        limits: ServiceLimits,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._write_path = write_path
        self._limits = limits
        self._clock = clock
        self._mutex = threading.Lock()
        self._members = GroupMembers(limits.max_group_members)
        self._locks = QueueLockTable(limits.consumer_lock_lease_ms / 1000, limits.max_queue_locks)
        # The term this node leads in, as its tables know it (None: not leading), and since
        # when (monotonic s).
        self._term: int | None = None
        self._leader_since_s = 0.0

    # ------------------------------------------------------------------ calls

    def heartbeat(
        self, request: client_pb2.ConsumerHeartbeatRequest
    ) -> client_pb2.ConsumerHeartbeatResponse:
        self._check_member(request.group, request.client_id)
        interval_ms = _heartbeat_interval_ms(request.heartbeat_interval_ms)
        topics = self._check_topics(request.topics)
        with self._mutex:
            now_s = self._clock()
            term = self._leading(now_s)
            members = self._members.heartbeat(
                request.group,
                request.client_id,
                topics,
                interval_ms / 1000,
                now_s,
                leaving=request.leaving,
            )
            if request.leaving:
                self._locks.release_client(request.group, request.client_id)
            warming_up = now_s - self._leader_since_s < WARM_UP_INTERVALS * interval_ms / 1000
        return client_pb2.ConsumerHeartbeatResponse(
            members=[
                client_pb2.TopicMembers(topic=topic, client_ids=members[topic]) for topic in topics
            ],
            warming_up=warming_up,
            term=term,
        )

    def lock(
        self, request: client_pb2.LockQueuesRequest, timeout_s: float
    ) -> client_pb2.LockQueuesResponse:
        received_s = self._clock()
        queue_ids = self._check_queues(request)
        lease_ms = self._limits.consumer_lock_lease_ms
        with self._mutex:
            self._leading(received_s)
            wait_s = self._locks.wait_s(received_s)
        if wait_s > 0:
            return client_pb2.LockQueuesResponse(
                lease_ms=lease_ms, retry_after_ms=max(1, math.ceil(wait_s * 1000))
            )
        # Still the leader after the request arrived (queue_lock_table.py: the failover rule);
        # the read also waits for this leader to apply its log, so the topic is known.
        self._write_path.fetch_offsets(request.group, [], timeout_s=timeout_s)
        check_offsets(self._store, [(request.topic, q, 0) for q in queue_ids])
        with self._mutex:
            # A term that changed meanwhile restarted the table's wait: nothing is granted.
            self._leading(self._clock())
            grant = self._locks.lock(
                request.group, request.topic, queue_ids, request.client_id, received_s
            )
        return client_pb2.LockQueuesResponse(
            locked_queue_ids=grant.locked_queue_ids,
            lease_ms=lease_ms,
            retry_after_ms=math.ceil(grant.retry_after_s * 1000),
        )

    def unlock(self, request: client_pb2.UnlockQueuesRequest) -> client_pb2.UnlockQueuesResponse:
        queue_ids = self._check_queues(request)
        with self._mutex:
            self._leading(self._clock())
            released = self._locks.unlock(
                request.group, request.topic, queue_ids, request.client_id
            )
        return client_pb2.UnlockQueuesResponse(unlocked_queue_ids=released)

    # ------------------------------------------------------------------ leadership

    def _leading(self, now_s: float) -> int:
        """This node's term when it leads (a new term empties the tables); NotLeaderError
        naming the leader otherwise. Call with the mutex held."""
        view = self._write_path.cluster_view()
        if view.role != "leader":
            if self._term is not None:
                self._term = None
                self._members.clear()
                self._locks.stop_leadership()
            leader = view.leader_id if view.leader_id != view.node_id else None
            raise NotLeaderError(leader, view.leader_address if leader else None, view.term)
        if view.term != self._term:
            self._term = view.term
            self._leader_since_s = now_s
            self._members.clear()
            self._locks.start_leadership(now_s)
        return view.term

    # ------------------------------------------------------------------ checks

    def _check_member(self, group: str, client_id: str) -> None:
        require_group_name(group, self._limits.message_limits)
        if not CLIENT_ID_PATTERN.fullmatch(client_id):
            raise InvalidRequestError(
                f"client_id {client_id[:40]!r} must be 1..128 characters from [A-Za-z0-9._@:%|-]"
            )

    def _check_topics(self, topics: Sequence[str]) -> list[str]:
        if not 1 <= len(topics) <= MAX_HEARTBEAT_TOPICS:
            raise InvalidRequestError(
                f"topics holds {len(topics)} names; a heartbeat names 1..{MAX_HEARTBEAT_TOPICS}"
            )
        for topic in topics:
            require_topic_name(topic, self._limits.message_limits)
        if len(set(topics)) != len(topics):
            raise InvalidRequestError("topics names a topic twice")
        return list(topics)

    def _check_queues(
        self, request: client_pb2.LockQueuesRequest | client_pb2.UnlockQueuesRequest
    ) -> list[int]:
        self._check_member(request.group, request.client_id)
        require_topic_name(request.topic, self._limits.message_limits)
        cap = self._limits.max_topic_queue_count
        if not 1 <= len(request.queue_ids) <= cap:
            raise InvalidRequestError(
                f"queue_ids holds {len(request.queue_ids)} ids; a call names 1..{cap} "
                "(max_topic_queue_count)"
            )
        for index, queue_id in enumerate(request.queue_ids):
            require_non_negative(queue_id, f"queue_ids[{index}]")
        return sorted(set(request.queue_ids))


def _heartbeat_interval_ms(requested_ms: int) -> int:
    if requested_ms == 0:
        return DEFAULT_HEARTBEAT_INTERVAL_MS
    if not MIN_HEARTBEAT_INTERVAL_MS <= requested_ms <= MAX_HEARTBEAT_INTERVAL_MS:
        raise InvalidRequestError(
            f"heartbeat_interval_ms is {requested_ms}; it must be "
            f"{MIN_HEARTBEAT_INTERVAL_MS}..{MAX_HEARTBEAT_INTERVAL_MS} (0 = "
            f"{DEFAULT_HEARTBEAT_INTERVAL_MS})"
        )
    return requested_ms
