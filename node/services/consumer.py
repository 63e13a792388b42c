"""The Consumer gRPC service: Pull (with long polling), the queries, and consumer-group offsets.

Rules this module keeps:
- Reads (Pull, QueryByKey, QueryOffsetByTime, QueryByMessageId) are served from this member's
  store, which only shows committed, dispatched messages; CommitOffsets, FetchOffsets and
  SendBack (send_back.py) go through the WritePath (leader only, replicated / linearizable);
  Heartbeat, LockQueues and UnlockQueues are the leader's in-memory group tables
  (group_coordinator.py).
- Stateless checks first (wire.py): a malformed topic or group name, a negative id, offset or
  timestamp is INVALID_ARGUMENT before the store is asked.
- Pull answers with the PullStatus client.proto defines; an offset outside the queue is a
  status, not an error. "0 = server default" fields resolve through ServiceLimits.
- Pull has two forms: ``StoredMessage``s built here, or (``return_records``) the selected
  records' bytes as stored, with no per-message work here (the client verifies the CRCs).
  Status, offsets, limits, the tag filter and long polling are the same code for both.
- A long poll waits on ``WritePath.wait_visible`` (woken by new dispatched messages, never a
  busy loop), for at most min(long_poll_timeout_ms, ``max_long_poll_ms``, the call's deadline
  less a margin), and returns early when the service stops or the call is cancelled.
- A read naming a topic, queue or message this member does not know catches up with the
  group once before it says so (fresh_read.py): a follower behind the leader does not deny a
  topic the user was just told exists.
- Every error becomes a status through ``status_codes.abort_on_error``.
"""

from __future__ import annotations

import threading
import time

import grpc

from raftlog.node.errors import InvalidRequestError
from raftlog.node.services.fresh_read import MAYBE_BEHIND_MESSAGE, read_fresh
from raftlog.node.services.group_coordinator import GroupCoordinator
from raftlog.node.services.limits import ServiceLimits, server_default, timeout_for_call
from raftlog.node.services.send_back import SendBack
from raftlog.node.services.status_codes import READ_OVERRIDES, ErrorCodes, abort_on_error
from raftlog.node.services.wire import (
    physical_offset_of_message_id,
    require_group_name,
    require_non_negative,
    require_topic_name,
    stored_message,
    tag_filter,
)
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.store.errors import InvalidMessageIdError
from raftlog.store.message_store import GetResult, MessageStore, RecordBytes

Code = grpc.StatusCode
PullStatus = client_pb2.PullStatus

# QueryByMessageId: the id is well-formed (checked first), so the store refusing it means it
# points at no stored record.
_MESSAGE_ID_OVERRIDES: ErrorCodes = {**READ_OVERRIDES, InvalidMessageIdError: Code.NOT_FOUND}
# wait_visible returning this early without progress is treated as "not waiting" (a stopping
# write path), and the poll sleeps instead, so it never spins.
_EARLY_WAKE_FRACTION = 0.5


class ConsumerService(client_pb2_grpc.ConsumerServicer):
    def __init__(self, store: MessageStore, write_path: WritePath, limits: ServiceLimits) -> None:
        self._store = store
        self._write_path = write_path
        self._limits = limits
        self._stopped = threading.Event()
        self._send_back = SendBack(store, write_path, limits)
        self._groups = GroupCoordinator(store, write_path, limits)

    def stop(self) -> None:
        """End every long poll now (each answers with what it has); call before the gRPC
        server stops, so its grace period is not spent waiting on polls."""
        self._stopped.set()

    # ------------------------------------------------------------------ Pull

    def Pull(
        self, request: client_pb2.PullRequest, context: grpc.ServicerContext
    ) -> client_pb2.PullResponse:
        with abort_on_error(context, overrides=READ_OVERRIDES):
            if request.this_replica:  # this member's view, as it is
                return self._pull(request, context)
            return read_fresh(self._write_path, context, lambda: self._pull(request, context))

    def _pull(
        self, request: client_pb2.PullRequest, context: grpc.ServicerContext
    ) -> client_pb2.PullResponse:
        limits = self._limits
        require_topic_name(request.topic, limits.message_limits)
        require_non_negative(request.queue_id, "queue_id")
        require_non_negative(request.queue_offset, "queue_offset")
        if not request.this_replica:
            self._write_path.check_read()
        max_messages = server_default(
            request.max_messages, limits.default_pull_messages, limits.max_pull_messages
        )
        max_bytes = server_default(
            request.max_bytes, limits.default_pull_bytes, limits.max_pull_bytes
        )
        tags = tag_filter(request.tags)
        poll_deadline = time.monotonic() + self._long_poll_s(request, context)
        slice_s = limits.long_poll_slice_ms / 1000
        while True:
            # Read before pulling: a message dispatched between the pull and the wait then
            # ends the wait at once, so no wake-up is lost.
            dispatched = self._store.dispatched_physical_offset
            response = self._pull_once(request, max_messages, max_bytes, tags)
            remaining_s = poll_deadline - time.monotonic()
            if (
                response.status != PullStatus.PULL_STATUS_NO_NEW_MESSAGES
                or remaining_s <= 0
                or self._stopped.is_set()
                or not context.is_active()
            ):
                return response
            wait_s = min(remaining_s, slice_s)
            started = time.monotonic()
            now_dispatched = self._write_path.wait_visible(dispatched, wait_s)
            if (
                now_dispatched <= dispatched
                and time.monotonic() - started < wait_s * _EARLY_WAKE_FRACTION
            ):
                self._stopped.wait(wait_s)

    def _long_poll_s(self, request: client_pb2.PullRequest, context: grpc.ServicerContext) -> float:
        """How long Pull may wait for a message: the request's timeout, capped by the server
        and answered a margin before the call's deadline."""
        limits = self._limits
        poll_ms = min(request.long_poll_timeout_ms, limits.max_long_poll_ms)
        if poll_ms <= 0:
            return 0.0
        time_remaining_s = context.time_remaining()
        if time_remaining_s is None:
            return poll_ms / 1000
        margin_s = limits.long_poll_deadline_margin_ms / 1000
        return max(0.0, min(poll_ms / 1000, float(time_remaining_s) - margin_s))

    def _pull_once(
        self,
        request: client_pb2.PullRequest,
        max_messages: int,
        max_bytes: int,
        tags: frozenset[str] | None,
    ) -> client_pb2.PullResponse:
        queue_offset = request.queue_offset
        read = (
            request.topic,
            request.queue_id,
            queue_offset,
            max_messages,
            max_bytes,
            tags,
            self._limits.max_pull_units_scanned,
        )
        if request.return_records:
            raw = self._store.get_record_bytes(*read)
            response = self._pull_response(queue_offset, raw.count, raw)
            if response.status == PullStatus.PULL_STATUS_FOUND:
                response.records = raw.records
                response.record_count = raw.count
            return response
        result = self._store.get_messages(*read)
        response = self._pull_response(queue_offset, len(result.messages), result)
        if response.status == PullStatus.PULL_STATUS_FOUND:
            response.messages.extend([stored_message(record) for record in result.messages])
        return response

    @staticmethod
    def _pull_response(
        queue_offset: int, found_count: int, read: GetResult | RecordBytes
    ) -> client_pb2.PullResponse:
        """The answer's status and offsets (client.proto PullStatus), without the messages."""
        next_queue_offset = read.next_queue_offset
        min_queue_offset, max_queue_offset = read.min_queue_offset, read.max_queue_offset
        if queue_offset < min_queue_offset:
            status, next_queue_offset = PullStatus.PULL_STATUS_OFFSET_TOO_SMALL, min_queue_offset
        elif queue_offset > max_queue_offset:
            status, next_queue_offset = PullStatus.PULL_STATUS_OFFSET_TOO_LARGE, max_queue_offset
        elif found_count:
            status = PullStatus.PULL_STATUS_FOUND
        elif next_queue_offset > queue_offset:
            status = PullStatus.PULL_STATUS_NO_MATCHED_MESSAGES
        else:
            status, next_queue_offset = PullStatus.PULL_STATUS_NO_NEW_MESSAGES, queue_offset
        return client_pb2.PullResponse(
            status=status,
            next_queue_offset=next_queue_offset,
            min_queue_offset=min_queue_offset,
            # The read may have seen messages dispatched after its bounds were taken.
            max_queue_offset=max(max_queue_offset, next_queue_offset),
        )

    # ------------------------------------------------------------------ queries

    def QueryByKey(
        self, request: client_pb2.QueryByKeyRequest, context: grpc.ServicerContext
    ) -> client_pb2.QueryByKeyResponse:
        with abort_on_error(context, overrides=READ_OVERRIDES):
            limits = self._limits
            require_topic_name(request.topic, limits.message_limits)
            if not request.key:
                raise InvalidRequestError("key is empty")
            require_non_negative(request.begin_timestamp_ms, "begin_timestamp_ms")
            require_non_negative(request.end_timestamp_ms, "end_timestamp_ms")
            # 0 = now (client.proto); the store reads its clock for None.
            end_ms = request.end_timestamp_ms or None
            if end_ms is not None and end_ms < request.begin_timestamp_ms:
                raise InvalidRequestError(
                    f"end_timestamp_ms {end_ms} is before begin_timestamp_ms "
                    f"{request.begin_timestamp_ms}"
                )
            max_messages = server_default(
                request.max_messages, limits.default_query_messages, limits.max_query_messages
            )
            records = read_fresh(
                self._write_path,
                context,
                lambda: self._store.query_by_key(
                    request.topic, request.key, request.begin_timestamp_ms, end_ms, max_messages
                ),
            )
            messages: list[client_pb2.StoredMessage] = []
            size_bytes = 0
            for record in records:
                stored = stored_message(record)
                size_bytes += stored.store_size_bytes
                if messages and size_bytes > limits.max_query_bytes:
                    break
                messages.append(stored)
            return client_pb2.QueryByKeyResponse(messages=messages)

    def QueryOffsetByTime(
        self, request: client_pb2.QueryOffsetByTimeRequest, context: grpc.ServicerContext
    ) -> client_pb2.QueryOffsetByTimeResponse:
        with abort_on_error(context, overrides=READ_OVERRIDES):
            require_topic_name(request.topic, self._limits.message_limits)
            require_non_negative(request.queue_id, "queue_id")
            require_non_negative(request.timestamp_ms, "timestamp_ms")
            # The store answers max_queue_offset when no message is that recent, and the first
            # live offset when every live one is: client.proto's rule.
            queue_offset = read_fresh(
                self._write_path,
                context,
                lambda: self._store.queue_offset_for_time(
                    request.topic, request.queue_id, request.timestamp_ms
                ),
            )
            return client_pb2.QueryOffsetByTimeResponse(queue_offset=queue_offset)

    def QueryByMessageId(
        self, request: client_pb2.QueryByMessageIdRequest, context: grpc.ServicerContext
    ) -> client_pb2.QueryByMessageIdResponse:
        with abort_on_error(context, overrides=_MESSAGE_ID_OVERRIDES):
            # A malformed id is INVALID_ARGUMENT (InvalidRequestError); after this check the
            # store's InvalidMessageIdError can only mean "no record there" (NOT_FOUND).
            physical_offset_of_message_id(request.msg_id)
            record = read_fresh(
                self._write_path,
                context,
                lambda: self._store.get_by_message_id(request.msg_id),
                MAYBE_BEHIND_MESSAGE,
            )
            return client_pb2.QueryByMessageIdResponse(message=stored_message(record))

    def SendBack(
        self, request: client_pb2.SendBackRequest, context: grpc.ServicerContext
    ) -> client_pb2.SendBackResponse:
        """A consumed message back for later: retry or dead-letter topic (send_back.py)."""
        with abort_on_error(context, overrides=_MESSAGE_ID_OVERRIDES):
            timeout_s = timeout_for_call(context.time_remaining(), self._limits.max_write_timeout_s)
            return self._send_back.send_back(request, timeout_s)

    # ------------------------------------------------------------------ group members, locks

    def Heartbeat(
        self, request: client_pb2.ConsumerHeartbeatRequest, context: grpc.ServicerContext
    ) -> client_pb2.ConsumerHeartbeatResponse:
        with abort_on_error(context):
            return self._groups.heartbeat(request)

    def LockQueues(
        self, request: client_pb2.LockQueuesRequest, context: grpc.ServicerContext
    ) -> client_pb2.LockQueuesResponse:
        with abort_on_error(context):
            timeout_s = timeout_for_call(context.time_remaining(), self._limits.max_write_timeout_s)
            return self._groups.lock(request, timeout_s)

    def UnlockQueues(
        self, request: client_pb2.UnlockQueuesRequest, context: grpc.ServicerContext
    ) -> client_pb2.UnlockQueuesResponse:
        with abort_on_error(context):
            return self._groups.unlock(request)

    # ------------------------------------------------------------------ consumer offsets

    def CommitOffsets(
        self, request: client_pb2.CommitOffsetsRequest, context: grpc.ServicerContext
    ) -> client_pb2.CommitOffsetsResponse:
        with abort_on_error(context):
            limits = self._limits
            require_group_name(request.group, limits.message_limits)
            if not request.offsets:
                raise InvalidRequestError("offsets is empty: nothing to commit")
            offsets: list[tuple[str, int, int]] = []
            seen: set[tuple[str, int]] = set()
            for index, entry in enumerate(request.offsets):
                require_topic_name(entry.topic, limits.message_limits)
                require_non_negative(entry.queue_id, f"offsets[{index}].queue_id")
                require_non_negative(entry.queue_offset, f"offsets[{index}].queue_offset")
                if (entry.topic, entry.queue_id) in seen:
                    raise InvalidRequestError(
                        f"offsets[{index}]: {entry.topic}/{entry.queue_id} appears twice; "
                        "send at most one entry per queue"
                    )
                seen.add((entry.topic, entry.queue_id))
                offsets.append((entry.topic, entry.queue_id, entry.queue_offset))
            raft_index = self._write_path.commit_offsets(
                request.group,
                offsets,
                timeout_s=timeout_for_call(context.time_remaining(), limits.max_write_timeout_s),
            )
            return client_pb2.CommitOffsetsResponse(raft_index=raft_index)

    def FetchOffsets(
        self, request: client_pb2.FetchOffsetsRequest, context: grpc.ServicerContext
    ) -> client_pb2.FetchOffsetsResponse:
        with abort_on_error(context):
            limits = self._limits
            require_group_name(request.group, limits.message_limits)
            queues: list[tuple[str, int]] = []
            for index, ref in enumerate(request.queues):
                require_topic_name(ref.topic, limits.message_limits)
                require_non_negative(ref.queue_id, f"queues[{index}].queue_id")
                queues.append((ref.topic, ref.queue_id))
            every_queue = not queues
            if every_queue:
                # "Every queue the group has an offset for": ask about every queue of every
                # topic (sorted by topic, queue id) and keep those found.
                queues = [
                    (topic.name, queue_id)
                    for topic in self._store.list_topics()
                    for queue_id in range(topic.queue_count)
                ]
            values = self._write_path.fetch_offsets(
                request.group,
                queues,
                timeout_s=timeout_for_call(context.time_remaining(), limits.max_write_timeout_s),
            )
            return client_pb2.FetchOffsetsResponse(
                offsets=[
                    client_pb2.FetchedOffset(
                        topic=topic,
                        queue_id=queue_id,
                        found=value is not None,
                        queue_offset=value or 0,
                    )
                    for (topic, queue_id), value in zip(queues, values, strict=True)
                    if value is not None or not every_queue
                ]
            )
