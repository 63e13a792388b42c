"""The producer service's half of delay messages: a Produce request that asks for a delay
(``delay_level`` or ``deliver_at_ms``, client.proto) has its batch rewritten into the schedule
topic here, on the leader's clock, before the write path stores it like any batch
(node/messaging/rewrite.py says what the rewrite keeps; the Raft leader's scheduler delivers).

Rules this module keeps:
- At most one of the two fields; a level outside the node's table, a negative time, or a time
  further ahead than ``timer_max_delay_ms`` is INVALID_ARGUMENT naming the bound, and nothing
  is written. A time at or before now is no delay: the batch goes to its topic at once.
- Raft mode only (the scheduler runs on the Raft leader): a master-slave node refuses a delay
  with INVALID_ARGUMENT rather than store a message nothing would ever deliver.
- The rewrite happens wherever the request arrived, but only a leader stores it (the write
  path refuses elsewhere), so the delivery time is always the leader's clock plus the delay.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from raftlog.node.errors import InvalidRequestError
from raftlog.node.messaging.delay import DelaySettings
from raftlog.node.messaging.rewrite import to_schedule_all
from raftlog.node.write_path import WritePath
from raftlog.proto import client_pb2
from raftlog.store.message_store import Message


def wants_delay(request: client_pb2.ProduceRequest) -> bool:
    return bool(request.delay_level or request.deliver_at_ms)


def check_delay(
    request: client_pb2.ProduceRequest, settings: DelaySettings, write_path: WritePath
) -> None:
    """The delay fields' checks (see the module rules), before any conversion."""
    if not wants_delay(request):
        return
    if request.delay_level and request.deliver_at_ms:
        raise InvalidRequestError("set at most one of delay_level and deliver_at_ms")
    if write_path.cluster_view().replication != "raft":
        raise InvalidRequestError(
            "delay messages need replication = raft; this node runs master-slave"
        )
    if request.delay_level:
        settings.level_delay_ms(request.delay_level)
    else:
        settings.check_deliver_at(request.deliver_at_ms, time.time_ns() // 1_000_000)


def delayed(
    messages: Sequence[Message], request: client_pb2.ProduceRequest, settings: DelaySettings
) -> list[Message]:
    """``messages`` rewritten into the schedule topic as the request's delay asks (checked by
    ``check_delay``), or as they are when it asks for none or for a time already past."""
    now_ms = time.time_ns() // 1_000_000
    if request.delay_level:
        due_ms = now_ms + settings.level_delay_ms(request.delay_level)
        return to_schedule_all(messages, due_ms, request.delay_level)
    if request.deliver_at_ms > now_ms:
        settings.check_deliver_at(request.deliver_at_ms, now_ms)
        return to_schedule_all(messages, request.deliver_at_ms, None)
    return list(messages)
