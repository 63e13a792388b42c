"""The consumer: pulls one topic's queues for a consumer group, with long polling.

Rules this module keeps:
- Positions start at the group's committed offsets (FetchOffsets, on the leader: never a
  stale offset after failover); a queue without one starts at its first live offset (0 unless
  retention deleted messages), or there for every queue with ``from_beginning=True``.
- Reads (Pull) may be served by any member; the offsets (FetchOffsets, CommitOffsets) only by
  the leader, through redirects. A follower that lags answers OFFSET_TOO_LARGE: the consumer
  keeps its position and asks again (another member may answer).
- ``poll`` returns each message once, in queue-offset order per queue, and advances the
  position past it; ``commit`` stores the positions (the NEXT offset to consume) so a
  restarted consumer resumes after what it committed (at-least-once if you commit after
  processing).
- Pulls ask for the stored records (``return_records``) and decode them here, so the serving
  member does no per-message work; every record's CRCs are verified before a message is
  returned (a corrupt one raises InternalError).
- A tag filter is checked twice: by the serving member (tag hash, then tag string) and here
  on the real tag string, so a hash collision never hands over another tag's message.
- In broadcast mode the offsets are this member's own, in a local file (local_offsets.py):
  the group's offsets on the cluster are never read or written.
- Clustering (no ``queue_ids``, not broadcast): the consumer reads only the queues the
  group's allocation gives it, and with ``orderly`` only those it holds the lock of
  (rebalance.py). Before each poll the positions follow that set: a queue given up has its
  position (or what ``set_revoke_listener`` says) committed, then its lock released; a queue
  taken starts at the group's committed offset. With explicit ``queue_ids`` nothing is
  shared or locked (RocketMQ's assign).
- When an answer says more messages are there, the next Pull of that queue is sent at once
  on one prefetch thread (no long poll), so the member reads and sends it while this thread
  decodes; it is used only if the position is still where it was asked from, and a failed or
  empty prefetch is simply asked again.
- Every wait is bounded: ``poll(timeout_s)`` returns by its timeout (plus one RPC's slack), and
  iteration stops when ``stop()`` is called or ``max_idle_s`` passes without a message.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any

from raftlog.client.connection import Connection
from raftlog.client.errors import (
    DeadlineExceededError,
    InternalError,
    RaftlogError,
    UnavailableError,
)
from raftlog.client.local_offsets import LocalOffsetStore, default_client_id
from raftlog.client.messages import Message
from raftlog.client.pulled_records import messages_from_records
from raftlog.client.queue_handover import QueueHandover, RevokeListener
from raftlog.client.rebalance import (
    DEFAULT_HEARTBEAT_INTERVAL_S,
    Rebalance,
    Sharing,
    check_member_id,
    new_member_id,
)
from raftlog.client.retry import RetryPolicy
from raftlog.client.retry_reader import RetryReader
from raftlog.client.send_back import (
    DEFAULT_MAX_RECONSUME_TIMES,
    SendBackResult,
    SendBacks,
    retry_topic,
)
from raftlog.client.tag_filter import ALL_TAGS, TagFilter
from raftlog.proto import client_pb2

# A long poll on one of several queues is kept short so the others are not starved.
_MULTI_QUEUE_POLL_SLICE_S = 0.2
# Extra time a Pull's RPC deadline gets over its long-poll timeout (the server answers by then).
_RPC_SLACK_S = 2.0
_ATTEMPT_TIMEOUT_S = 10.0
# Messages per Pull: the server's cap. A Pull answers with what is there (it never waits to
# fill a batch), so a large default costs nothing when traffic is light; RocketMQ's 32 cost a
# round trip per 32 messages (27k msgs/s of 1 KiB against 87-104k with 1,024).
DEFAULT_MAX_MESSAGES = 1024


class Consumer:
    """Consumes ``topic`` for consumer ``group``.

    ``queue_ids``: the queues to read (default: all of the topic's queues). ``tags``: a tag
    filter expression, ``"*"`` (all, the default) or ``"TagA || TagB"``, or a sequence of
    tags (client/tag_filter.py; a malformed one raises ValueError here, before any call).
    ``max_messages``: per Pull.

    ``broadcast=True``: every member of the group reads every message (RocketMQ's
    BROADCASTING), and each member keeps its own offsets in a local file,
    ``<offsets_dir>/<client_id>/<group>/<topic>.json``, as RocketMQ's LocalFileOffsetStore
    does (client/local_offsets.py says why local and not on the cluster). ``client_id``
    defaults to the host name and ``offsets_dir`` to $RAFTLOG_OFFSETS_DIR or
    ~/.raftlog_offsets; a restarted member with the same two resumes after what it
    committed. Two live members with the same client id, group and topic on one host are
    refused (OffsetsInUseError).

    Clustering (the default without ``queue_ids``): the group's live members share the
    topic's queues (docs/messaging.md "Clustering and rebalance"): each sends the leader a
    heartbeat every ``heartbeat_interval_s`` and reads what ``allocation`` ("average",
    "average_by_circle" or "consistent_hash") gives it; ``client_id`` is its member id
    (default: host, process and a random part). ``from_beginning`` applies to the first
    queues it reads; a queue taken over later resumes at the group's committed offset.
    ``queue_ids`` reads those queues instead, sharing nothing. ``orderly=True`` reads a queue
    only while it holds the queue's lock (docs/messaging.md "Ordered messages"): one member
    at a time, in queue order, across failovers; it does not read the retry topic.

    Retries (docs/messaging.md): ``reconsume_later(message)`` sends a message back; it comes
    back through ``poll`` from the group's retry topic, which the consumer reads by itself
    (``subscribe_retry``; not in broadcast mode), until ``max_reconsume_times`` retries
    (default 16) send it to the dead-letter topic ``%DLQ%<group>`` instead.
    """

    def __init__(
        self,
        addresses: str | Sequence[str] | Connection,
        group: str,
        topic: str,
        queue_ids: Sequence[int] | None = None,
        *,
        tags: str | Sequence[str] = ALL_TAGS,
        from_beginning: bool = False,
        max_messages: int = DEFAULT_MAX_MESSAGES,
        timeout_s: float = 30.0,
        broadcast: bool = False,
        client_id: str | None = None,
        offsets_dir: str | os.PathLike[str] | None = None,
        max_reconsume_times: int = DEFAULT_MAX_RECONSUME_TIMES,
        subscribe_retry: bool = True,
        orderly: bool = False,
        allocation: str = "average",
        heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S,
    ) -> None:
        if orderly and queue_ids is not None:
            raise ValueError("orderly consumption locks the queues rebalance gives: no queue_ids")
        if not group:
            raise ValueError("group is empty")
        if not topic:
            raise ValueError("topic is empty")
        self.group = group
        self.topic = topic
        self._requested_queue_ids = list(queue_ids) if queue_ids is not None else None
        self.tag_filter = TagFilter.parse(tags)
        self._from_beginning = from_beginning
        self._max_messages = max_messages
        self._owns_connection = not isinstance(addresses, Connection)
        self._connection = addresses if isinstance(addresses, Connection) else Connection(addresses)
        # Several attempts fit in the total, so a member that does not answer (cut off, or
        # frozen while no newer leader is known yet) is given up for another.
        self._policy = RetryPolicy(
            total_timeout_s=timeout_s, attempt_timeout_s=min(_ATTEMPT_TIMEOUT_S, timeout_s)
        )
        # queue id -> next queue offset to consume; None until the first poll.
        self._positions: dict[int, int] | None = None
        self._committed: dict[int, int] = {}
        self._rotation = 0
        # Queues poll() skips until resume() (flow control: the push consumer's full queues).
        self._paused: set[int] = set()
        self._stop = threading.Event()
        # queue id -> (offset asked, the Pull in flight): the next answer, fetched while the
        # caller handles the current one. The pool starts with the first prefetch.
        self._prefetched: dict[int, tuple[int, Future[Any]]] = {}
        self._prefetch_pool: ThreadPoolExecutor | None = None
        self.broadcast = broadcast
        self.orderly = orderly
        self._send_backs = SendBacks(self._connection, group, max_reconsume_times, self._policy)
        # Clustering: the queues this member reads follow the group's allocation.
        self.member_id = check_member_id(client_id) if client_id else new_member_id()
        sharing = Sharing(allocation, heartbeat_interval_s)
        handover = self._clustering(sharing, orderly, from_beginning)
        self._handover = handover if queue_ids is None and not broadcast else None
        # The group's retry topic, read beside this one (not in broadcast: RocketMQ's neither;
        # not orderly: a message is retried in place there).
        reads_retry = subscribe_retry and not broadcast and not orderly
        self._retry = self._retry_reader(sharing) if reads_retry else None
        # Last: it takes the member's lock on its offsets file, which close() releases.
        self._local_offsets = (
            LocalOffsetStore(offsets_dir, client_id or default_client_id(), group, topic)
            if broadcast
            else None
        )

    def _clustering(self, sharing: Sharing, orderly: bool, from_beginning: bool) -> QueueHandover:
        """The rebalance plan and its hand-over (built always: bad settings raise here)."""
        plan = Rebalance(
            self._connection,
            self.group,
            self.topic,
            self.member_id,
            self._queue_bounds,
            allocation=sharing.allocation,
            heartbeat_interval_s=sharing.heartbeat_interval_s,
            orderly=orderly,
            policy=self._policy,
        )
        return QueueHandover(
            plan, self._initial_positions, self.commit, self._forget_queues, from_beginning
        )

    def _retry_reader(self, sharing: Sharing) -> RetryReader:
        """The group's retry topic, read by this member as the group shares it."""
        topic = retry_topic(self.group)
        reader = Consumer(
            self._connection,
            self.group,
            topic,
            subscribe_retry=False,
            client_id=self.member_id,
            allocation=sharing.allocation,
            heartbeat_interval_s=sharing.heartbeat_interval_s,
        )
        return RetryReader(reader, topic)

    @property
    def positions(self) -> dict[int, int]:
        """Queue id -> the next queue offset this consumer will read."""
        return dict(self._start())

    # -- calls -----------------------------------------------------------------------------

    def _call(self, service: str, method: str, request: Any, *, leader_only: bool) -> Any:
        def attempt(timeout_s: float) -> Any:
            return self._connection.call(
                service, method, request, timeout_s=timeout_s, leader_only=leader_only, write=False
            )

        return self._policy.run(attempt, idempotent=True)

    def _queue_bounds(self) -> dict[int, int]:
        """Queue id -> min live offset, for the queues this consumer reads."""
        response = self._call(
            "Admin",
            "DescribeTopic",
            client_pb2.DescribeTopicRequest(topic=self.topic),
            leader_only=False,
        )
        bounds = {q.queue_id: q.min_queue_offset for q in response.queues}
        if not bounds:
            bounds = {q: 0 for q in range(response.topic.queue_count)}
        if self._requested_queue_ids is None:
            return bounds
        missing = [q for q in self._requested_queue_ids if q not in bounds]
        if missing:
            raise ValueError(
                f"topic {self.topic!r} has no queue {missing[0]} (it has {len(bounds)})"
            )
        return {q: bounds[q] for q in self._requested_queue_ids}

    def _start(self) -> dict[int, int]:
        """The positions, fetched on first use."""
        if self._positions is not None:
            return self._positions
        bounds = self._queue_bounds()
        if self._handover is not None:
            self._positions = {}
            self._handover.plan.bounds = bounds
            self._rebalance()
            return self._positions
        self._positions = self._initial_positions(bounds, self._from_beginning)
        return self._positions

    def _initial_positions(self, bounds: Mapping[int, int], from_beginning: bool) -> dict[int, int]:
        """Where the queues of ``bounds`` (queue id -> first live offset) start: at the
        stored offsets unless ``from_beginning``."""
        positions = dict(bounds)
        if not from_beginning:
            for queue_id, offset in self._stored_offsets(sorted(bounds)).items():
                if queue_id in positions:
                    positions[queue_id] = max(offset, 0)
                    self._committed[queue_id] = offset
        return positions

    def _rebalance(self) -> None:
        """Read the queues the group's allocation (and, orderly, the locks) give now."""
        if self._handover is not None and self._positions is not None:
            self._handover.apply(self._positions)

    def _forget_queues(self, queue_ids: list[int]) -> None:
        """Stop reading these queues (given up: their offsets are committed)."""
        for queue_id in queue_ids:
            self._start().pop(queue_id, None)
            self._committed.pop(queue_id, None)
            self._prefetched.pop(queue_id, None)
            self._paused.discard(queue_id)

    def may_consume(self, queue_id: int) -> bool:
        """Orderly clustering: whether this member's lock on ``queue_id`` may be used now
        (always True otherwise). Thread-safe."""
        locks = self._handover.plan.locks if self._handover is not None else None
        return locks is None or locks.may_use(queue_id)

    def set_revoke_listener(self, listener: RevokeListener | None) -> None:
        """``listener(queue_ids, positions)`` runs on the polling thread before queues are
        given up and answers the offsets to commit for them; it returns only once nothing
        of them is consumed any more (queue_handover.py). Clustering only."""
        if self._handover is not None:
            self._handover.revoke_listener = listener

    def _stored_offsets(self, queue_ids: list[int]) -> dict[int, int]:
        """Queue id -> committed offset: this member's file (broadcast), else the group's
        offsets on the leader."""
        if self._local_offsets is not None:
            return self._local_offsets.load()
        response = self._call(
            "Consumer",
            "FetchOffsets",
            client_pb2.FetchOffsetsRequest(
                group=self.group,
                queues=[client_pb2.QueueRef(topic=self.topic, queue_id=q) for q in queue_ids],
            ),
            leader_only=True,
        )
        return {f.queue_id: f.queue_offset for f in response.offsets if f.found}

    def _pull(self, queue_id: int, offset: int, long_poll_s: float) -> Any:
        request = client_pb2.PullRequest(
            topic=self.topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_messages=self._max_messages,
            tags=self.tag_filter.pull_tags,
            long_poll_timeout_ms=int(long_poll_s * 1000),
            consumer_group=self.group,
            return_records=True,
        )
        # One attempt routed over the members: a retry loop here would hold up the poll.
        return self._connection.call(
            "Consumer",
            "Pull",
            request,
            timeout_s=long_poll_s + _RPC_SLACK_S,
            leader_only=False,
            write=False,
        )

    # -- reading ---------------------------------------------------------------------------

    def poll(self, timeout_s: float = 1.0) -> list[Message]:
        """Messages available now, or the first to arrive within ``timeout_s``; [] when none
        did. Advances the positions past the returned messages. Paused queues are skipped;
        with every queue paused it waits ``timeout_s`` (or until ``stop()``) and returns [].
        Messages sent back earlier (``reconsume_later``) come back here too, from the group's
        retry topic: ``topic`` is their first topic, ``pulled_topic`` the retry topic."""
        if self._retry is None:
            return self._poll_own(timeout_s)
        return self._retry.poll_with(self._poll_own, timeout_s)

    def _poll_own(self, timeout_s: float) -> list[Message]:
        positions = self._start()
        self._rebalance()
        queue_ids = sorted(q for q in positions if q not in self._paused)
        if not queue_ids:
            self._stop.wait(max(0.0, timeout_s))
            return []
        deadline = time.monotonic() + max(0.0, timeout_s)
        first_sweep = True
        # Bounded: each round pulls every queue once; rounds end at the deadline, and a
        # round with a long poll takes at least a slice, so the count is bounded too.
        max_rounds = 2 + int(timeout_s / _MULTI_QUEUE_POLL_SLICE_S) + len(queue_ids)
        for _ in range(max_rounds):
            for index in range(len(queue_ids)):
                # Per queue, not per sweep: a sweep of idle queues, each long-polled for a
                # slice, would otherwise overrun the deadline by up to a slice per queue.
                remaining_s = deadline - time.monotonic()
                if not first_sweep and remaining_s <= 0:
                    return []
                queue_id = queue_ids[(self._rotation + index) % len(queue_ids)]
                if first_sweep:
                    long_poll_s = 0.0
                elif len(queue_ids) == 1:
                    long_poll_s = max(0.0, remaining_s)
                else:
                    long_poll_s = max(0.0, min(_MULTI_QUEUE_POLL_SLICE_S, remaining_s))
                messages = self._poll_queue(queue_id, long_poll_s)
                if self._handover and not self._handover.still_locked(
                    queue_id, messages, positions
                ):
                    return []
                if messages:
                    self._rotation = (self._rotation + index + 1) % len(queue_ids)
                    return messages
            first_sweep = False
            if time.monotonic() >= deadline:
                break
        return []

    def _poll_queue(self, queue_id: int, long_poll_s: float) -> list[Message]:
        positions = self._start()
        offset = positions[queue_id]
        response = self._prefetched_answer(queue_id, offset)
        if response is None:
            try:
                response = self._pull(queue_id, offset, long_poll_s)
            except (UnavailableError, DeadlineExceededError):
                if long_poll_s > 0:
                    time.sleep(min(long_poll_s, 0.1))  # the cluster is briefly away: don't spin
                return []
        status = response.status
        if status == client_pb2.PULL_STATUS_FOUND:
            if response.next_queue_offset < response.max_queue_offset:
                # More is there: ask for it now, so the member reads and sends it while this
                # answer is decoded (and the caller handles it).
                self._prefetch(queue_id, response.next_queue_offset)
            # Re-checked here too: a tag that only shares a hash with a wanted one stays out.
            messages = self.tag_filter.select(_messages_of(response))
            positions[queue_id] = response.next_queue_offset
            return messages
        if status in (
            client_pb2.PULL_STATUS_NO_MATCHED_MESSAGES,
            client_pb2.PULL_STATUS_OFFSET_TOO_SMALL,
        ):
            # Skip what the filter rejected, or what retention deleted.
            positions[queue_id] = max(offset, response.next_queue_offset)
        elif status == client_pb2.PULL_STATUS_OFFSET_TOO_LARGE and long_poll_s > 0:
            time.sleep(min(long_poll_s, 0.1))  # a lagging follower: ask again shortly
        return []

    def _prefetch(self, queue_id: int, offset: int) -> None:
        """Start the Pull of ``queue_id`` at ``offset`` on the prefetch thread (no long poll)."""
        if self._stop.is_set():
            return  # closing (perhaps from another thread): the pool may be shut down
        if self._prefetch_pool is None:
            self._prefetch_pool = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="raftlog-consumer-prefetch"
            )
        try:
            future = self._prefetch_pool.submit(self._pull, queue_id, offset, 0.0)
        except RuntimeError:
            return  # shut down by close() since the check above: no prefetch
        self._prefetched[queue_id] = (offset, future)

    def _prefetched_answer(self, queue_id: int, offset: int) -> Any | None:
        """The prefetched answer for ``queue_id`` if it was asked at ``offset`` (the position
        may have moved since: seek) and found messages; None means "pull now" (a failed or
        empty prefetch is asked again, with this poll's long poll)."""
        prefetched = self._prefetched.pop(queue_id, None)
        if prefetched is None or prefetched[0] != offset:
            return None
        try:
            # Bounded: the Pull has no long poll, and its RPC deadline is _RPC_SLACK_S.
            response = prefetched[1].result(timeout=2 * _RPC_SLACK_S)
        except (RaftlogError, FutureTimeoutError):
            return None
        return response if response.status == client_pb2.PULL_STATUS_FOUND else None

    def __iter__(self) -> Iterator[Message]:
        """Messages as they arrive, until ``stop()`` (no ``max_idle_s``: see ``iterate``)."""
        return self.iterate()

    def iterate(
        self, *, max_idle_s: float | None = None, poll_timeout_s: float = 1.0
    ) -> Iterator[Message]:
        """Yield messages until ``stop()`` is called or ``max_idle_s`` passes without one."""
        idle_since = time.monotonic()
        while not self._stop.is_set():
            if max_idle_s is not None and time.monotonic() - idle_since >= max_idle_s:
                return
            wait_s = poll_timeout_s
            if max_idle_s is not None:
                wait_s = min(wait_s, max(0.0, max_idle_s - (time.monotonic() - idle_since)))
            messages = self.poll(wait_s)
            if messages:
                idle_since = time.monotonic()
            yield from messages

    def stop(self) -> None:
        """Make iteration end after the current poll (thread-safe)."""
        self._stop.set()

    def pause(self, queue_ids: Iterable[int]) -> None:
        """Stop pulling these queues (positions stay) until ``resume``, as Kafka's and
        RocketMQ's lite consumers do."""
        self._paused.update(queue_ids)

    def resume(self, queue_ids: Iterable[int]) -> None:
        """Pull these queues again."""
        self._paused.difference_update(queue_ids)

    def reconsume_later(self, message: Message, delay_level: int = 0) -> SendBackResult:
        """Send ``message`` back for later (RocketMQ's RECONSUME_LATER): it comes back to the
        group from its retry topic after delay level 3 + its retries (``delay_level``: that
        level instead), or goes to the dead-letter topic ``%DLQ%<group>`` once retried
        ``max_reconsume_times`` times. Returns once the copy is durable, so committing past
        the message is then safe; raises RaftlogError otherwise (nothing says a copy exists:
        consume it again). Thread-safe. client/send_back.py says more."""
        if self.broadcast:
            raise ValueError("broadcast consumption has no retry topic (RocketMQ's neither)")
        if self.orderly:
            raise ValueError("orderly consumption retries in place: seek back to the message")
        return self._send_backs.send(message, delay_level)

    # -- positions -------------------------------------------------------------------------

    def commit(self, offsets: Mapping[int, int] | None = None) -> int | None:
        """Store the positions that changed since the last commit (leader only; retried),
        or ``offsets`` (queue id -> the next offset to consume) instead of the positions;
        the retry topic's positions too, but not with ``offsets``.
        Returns the Raft index of the commit, or None when nothing changed. Raises
        UnknownOutcomeError when the answer was lost (committing again is harmless). In
        broadcast mode the offsets go to this member's local file and the answer is None."""
        positions = self._start()
        if offsets is not None:
            unknown = sorted(set(offsets) - set(positions))
            if unknown or any(o < 0 for o in offsets.values()):
                raise ValueError(f"offsets {dict(offsets)} name a queue not read or are < 0")
            positions = dict(offsets)
        changed = {q: o for q, o in positions.items() if self._committed.get(q) != o}
        if not changed:
            return self._commit_retry(offsets)
        if self._local_offsets is not None:
            self._local_offsets.save(changed)
            self._committed.update(changed)
            return None
        request = client_pb2.CommitOffsetsRequest(
            group=self.group,
            offsets=[
                client_pb2.QueueOffset(topic=self.topic, queue_id=q, queue_offset=o)
                for q, o in sorted(changed.items())
            ],
        )

        def attempt(timeout_s: float) -> Any:
            return self._connection.call(
                "Consumer",
                "CommitOffsets",
                request,
                timeout_s=timeout_s,
                leader_only=True,
                write=True,
            )

        # Committing the same offsets twice stores the same value: safe to retry.
        response = self._policy.run(attempt, idempotent=True)
        self._committed.update(changed)
        return max(int(response.raft_index), self._commit_retry(offsets) or 0)

    @property
    def retry_positions(self) -> dict[int, int]:
        """The retry topic's queue id -> next offset to read ({} when it is not read)."""
        return self._retry.positions if self._retry is not None else {}

    def commit_retry(self, offsets: Mapping[int, int]) -> int | None:
        """Commit ``offsets`` (retry queue id -> next offset) of the retry topic: how far a
        caller that tracks retried messages itself (the push consumer) is done with them."""
        return self._retry.commit(offsets) if self._retry is not None else None

    def _commit_retry(self, offsets: Mapping[int, int] | None) -> int | None:
        """Commit the retry topic's positions too, unless explicit ``offsets`` say how far
        this topic is done (the retry topic's progress is then not known)."""
        return self._retry.commit() if self._retry is not None and offsets is None else None

    def seek(self, queue_id: int, offset: int) -> None:
        """Continue ``queue_id`` from queue ``offset``."""
        positions = self._start()
        if queue_id not in positions:
            raise ValueError(f"this consumer does not read queue {queue_id}")
        if offset < 0:
            raise ValueError(f"offset {offset} is negative")
        positions[queue_id] = offset

    def seek_to_time(self, timestamp_ms: int) -> dict[int, int]:
        """Continue every queue from its first message stored at or after ``timestamp_ms``;
        returns the new positions."""
        if timestamp_ms < 0:
            raise ValueError(f"timestamp_ms {timestamp_ms} is negative")
        positions = self._start()
        for queue_id in sorted(positions):
            response = self._call(
                "Consumer",
                "QueryOffsetByTime",
                client_pb2.QueryOffsetByTimeRequest(
                    topic=self.topic, queue_id=queue_id, timestamp_ms=timestamp_ms
                ),
                leader_only=False,
            )
            positions[queue_id] = response.queue_offset
        return dict(positions)

    def close(self) -> None:
        """Stop iterating and close the connection (if this consumer opened it). Does not
        commit: call ``commit()`` first to keep your place."""
        self._stop.set()
        self._prefetched.clear()
        if self._prefetch_pool is not None:
            # A prefetch in flight ends with its RPC deadline (or at once on a closed channel).
            self._prefetch_pool.shutdown(wait=False, cancel_futures=True)
        if self._retry is not None:
            self._retry.close()
        if self._handover is not None:
            self._handover.plan.leave()  # does not commit: close() never does
        if self._owns_connection:
            self._connection.close()
        if self._local_offsets is not None:
            self._local_offsets.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _messages_of(response: Any) -> list[Message]:
    """A FOUND answer's messages: decoded from its records (a server that predates
    ``return_records`` answers with StoredMessages instead, converted as they are)."""
    if response.messages:
        return [Message.from_proto(m) for m in response.messages]
    messages = messages_from_records(response.records)
    if len(messages) != response.record_count:
        raise InternalError(
            f"a Pull answer holds {len(messages)} records but says {response.record_count}"
        )
    return messages
