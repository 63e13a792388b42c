"""Clustering consumption's rebalance, on the member's side: which of a topic's queues this
consumer reads now (RocketMQ's RebalanceImpl; docs/messaging.md "Clustering and rebalance").

Each member sends the leader a heartbeat every ``heartbeat_interval_s``
(Consumer.Heartbeat); the answer lists the group's live members on the topic, and the member
allocates the topic's queues over them with the group's strategy (client/allocation.py).
With ``orderly`` it also locks the queues allocated to it (client/queue_locks.py) and reads
only those it holds. The consumer (client/consumer.py) asks ``target`` before each poll and
moves its positions to match: a queue it gives up has its offset committed first, then its
lock released (``released``), so the next owner starts where it stopped.

Rules this module keeps:
- Calls run on the consumer's polling thread and are single attempts bounded by
  ``CALL_TIMEOUT_S``: a leader that is away never holds a poll up for long. After a failed
  heartbeat the member keeps the queues it has and tries again after ``RETRY_S``. Only the
  first heartbeat is retried (``policy``) and raises when it fails, as the consumer's first
  use always did: until it succeeds the member has no queues at all.
- The topic's queues are read again (DescribeTopic) with every heartbeat, so queues added to
  the topic are allocated too.
- A queue newly allocated to this member is started only ``TAKE_GRACE_INTERVALS``
  heartbeat intervals later, unless the member is alone on the list: its previous owner
  gives it up (committing its offset) at its own next heartbeat, so starting at once would
  read again everything that owner consumed since its last commit. Orderly consumers need
  no grace: the lock makes the new owner wait for the old one's unlock.
- A leader that just took over answers ``warming_up`` while members may be missing from its
  list: a member that already reads queues keeps them until the list is complete, instead of
  taking queues from members that simply have not sent their heartbeat yet.
- A server without the Heartbeat method (UNIMPLEMENTED: older than this client) cannot tell
  members apart: the consumer then reads every queue, as consumers did before, and says so
  once in the log; orderly consumption needs the locks and raises instead.
- Not thread-safe: the consumer's polling thread calls it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from raftlog.client.allocation import strategy
from raftlog.client.connection import Connection
from raftlog.client.errors import InternalError, RaftlogError
from raftlog.client.queue_locks import QueueLocks
from raftlog.client.rate_limited_log import RateLimitedLog
from raftlog.client.retry import RetryPolicy
from raftlog.proto import client_pb2

_log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_INTERVAL_S = 5.0
TAKE_GRACE_INTERVALS = 2.0
CALL_TIMEOUT_S = 3.0
RETRY_S = 1.0
# What the node accepts as a member id (node/services/group_coordinator.py).
MEMBER_ID_PATTERN = re.compile(r"[A-Za-z0-9._@:%|-]{1,128}")


@dataclass(frozen=True, slots=True)
class Sharing:
    """How a group shares a topic: the allocation strategy's name and the heartbeat's."""

    allocation: str = "average"
    heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S


def new_member_id() -> str:
    """A member id unique to this consumer: host, process and a random part (RocketMQ's
    clientId is ip@pid, which two consumers of one process share)."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname() or "localhost")[:80]
    return f"{host}@{os.getpid()}-{uuid.uuid4().hex[:8]}"


def check_member_id(member_id: str) -> str:
    if not MEMBER_ID_PATTERN.fullmatch(member_id):
        raise ValueError(f"client_id {member_id!r} must be 1..128 characters of [A-Za-z0-9._@:%|-]")
    return member_id


class Rebalance:
    """The queues one member of ``group`` reads on ``topic`` (see the module docstring).

    ``describe()`` answers the topic's queue ids -> first live offset (DescribeTopic).
    """

    def __init__(
        self,
        connection: Connection,
        group: str,
        topic: str,
        member_id: str,
        describe: Callable[[], dict[int, int]],
        *,
        allocation: str = "average",
        heartbeat_interval_s: float = DEFAULT_HEARTBEAT_INTERVAL_S,
        orderly: bool = False,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0.1 <= heartbeat_interval_s <= 300:
            raise ValueError(f"heartbeat_interval_s {heartbeat_interval_s} is not in 0.1..300")
        self._connection = connection
        self.group = group
        self.topic = topic
        self.member_id = check_member_id(member_id)
        self._describe = describe
        self._allocate = strategy(allocation)
        self._interval_s = heartbeat_interval_s
        self._clock = clock
        self._policy = policy
        self.locks = (
            QueueLocks(self._leader_call, group, topic, member_id, clock) if orderly else None
        )
        # Queue id -> first live offset, as of the last heartbeat.
        self.bounds: dict[int, int] = {}
        self._allocated: set[int] | None = None
        # Allocated queue id -> from when it may be started (monotonic s; see the module).
        self._takeable_at_s: dict[int, float] = {}
        self._next_beat_s = 0.0
        self._joined = False
        self._supported = True
        self._failures = RateLimitedLog(_log)

    def _leader_call(self, method: str, request: Any) -> Any:
        return self._connection.call(
            "Consumer", method, request, timeout_s=CALL_TIMEOUT_S, leader_only=True, write=False
        )

    def target(self, current: Iterable[int]) -> set[int] | None:
        """The queues to read from now on, or None when ``current`` stays as it is."""
        if self._clock() >= self._next_beat_s:
            self._beat(bool(set(current)))
        if self._allocated is None:
            return None
        reading = set(current)
        now_s = self._clock()
        wanted = {
            q for q in self._allocated if q in reading or self._takeable_at_s.get(q, 0.0) <= now_s
        }
        if self.locks is not None:
            # Locks taken for queues allocated elsewhere meanwhile, never read: give back.
            self.locks.release(self.locks.usable() - wanted - reading)
            self.locks.refresh(wanted)
            wanted &= self.locks.usable()
        return wanted if wanted != reading else None

    def _beat(self, reading: bool) -> None:
        """A heartbeat, and the allocation its answer gives (kept when it fails)."""
        first = self._allocated is None
        self._next_beat_s = self._clock() + RETRY_S
        try:
            self.bounds = self._describe()
            members, warming_up = self._heartbeat(first)
        except RaftlogError as error:
            if not _unimplemented(error):
                if first:
                    raise
                self._failures.warning("rebalance of %s: %s; retried shortly", self.topic, error)
                return
            self._without_members()
            members, warming_up = [self.member_id], False
        self._next_beat_s = self._clock() + self._interval_s
        if warming_up and reading and self._allocated is not None:
            return  # a new leader's list may lack members: keep what is read until complete
        allocated = set(self._allocate(self.topic, self.member_id, members, sorted(self.bounds)))
        # Alone per a warming leader's list too: a consumer starting with a new cluster would
        # otherwise wait for nothing (a member joining just after a failover may then read
        # beside owners the list lacks, until it is complete: duplicates, never a loss).
        alone = members == [self.member_id]
        grace_s = (
            0.0 if alone or self.locks is not None else TAKE_GRACE_INTERVALS * self._interval_s
        )
        takeable_at_s = self._clock() + grace_s
        self._takeable_at_s = {q: self._takeable_at_s.get(q, takeable_at_s) for q in allocated}
        if allocated != self._allocated:
            _log.info(
                "group %s topic %s: member %s of %d reads queues %s",
                self.group,
                self.topic,
                self.member_id,
                len(members),
                sorted(allocated),
            )
        self._allocated = allocated

    def _heartbeat(self, first: bool) -> tuple[list[str], bool]:
        if not self._supported:
            return [self.member_id], False
        request = client_pb2.ConsumerHeartbeatRequest(
            group=self.group,
            client_id=self.member_id,
            topics=[self.topic],
            heartbeat_interval_ms=round(self._interval_s * 1000),
        )
        if first and self._policy is not None:

            def attempt(timeout_s: float) -> Any:
                return self._connection.call(
                    "Consumer",
                    "Heartbeat",
                    request,
                    timeout_s=timeout_s,
                    leader_only=True,
                    write=False,
                )

            response = self._policy.run(attempt, idempotent=True)
        else:
            response = self._leader_call("Heartbeat", request)
        self._joined = True
        members = list(response.members[0].client_ids) if response.members else []
        if self.member_id not in members:
            members.append(self.member_id)  # it just said it is alive
        return members, bool(response.warming_up)

    def _without_members(self) -> None:
        if self.locks is not None:
            raise InternalError(
                "orderly consumption needs a server with Consumer.LockQueues; this one is older"
            )
        if self._supported:
            _log.warning(
                "the server has no Consumer.Heartbeat (older than this client): group %s reads "
                "every queue of %s in every member",
                self.group,
                self.topic,
            )
        self._supported = False

    def released(self, queue_ids: Iterable[int]) -> None:
        """The consumer gave these queues up (offsets committed): release their locks."""
        if self.locks is not None:
            self.locks.release(queue_ids)

    def leave(self) -> None:
        """Leave the group (the consumer closes): the others take its queues at their next
        heartbeat, and its locks are released. A failure is logged (it then expires)."""
        if not self._joined:
            return
        self._joined = False
        if self.locks is not None:
            self.locks.forget()
        try:
            self._leader_call(
                "Heartbeat",
                client_pb2.ConsumerHeartbeatRequest(
                    group=self.group,
                    client_id=self.member_id,
                    topics=[self.topic],
                    heartbeat_interval_ms=round(self._interval_s * 1000),
                    leaving=True,
                ),
            )
        except RaftlogError as error:
            _log.warning(
                "group %s: leaving failed (%s); the member expires instead", self.group, error
            )


def _unimplemented(error: RaftlogError) -> bool:
    return bool(error.code == grpc.StatusCode.UNIMPLEMENTED)
