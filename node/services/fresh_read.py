"""Fresh reads: a member about to answer that a topic, a queue or a message does not exist
first makes sure it is not merely behind.

Why: Raft acknowledges a topic's creation (or a message) once a majority stored it; the
other members apply it a moment later. A consumer pinned to such a member, or an Admin call
that reached it, was told NOT_FOUND for a topic the user had just created. Now the member
passes its read barrier (WritePath.catch_up: a read index through the leader) and reads
again; only then is "does not exist" the answer.

Rules this module keeps:
- Only the "not here" errors trigger it (UnknownTopicError, InvalidQueueIdError, and for a
  message id lookup InvalidMessageIdError): every other answer, and every read that finds
  what it names, costs nothing extra.
- The wait is bounded by ``CATCH_UP_MAX_S`` and by the call's deadline; when the barrier
  cannot be passed (no leader, no quorum) the original error is the answer, unchanged.
- One retry: the read runs at most twice.
- A list (ListTopics) cannot tell what it lacks, so it catches up first, every time, under
  the same bounds; a member that cannot pass the barrier lists what it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import grpc

from raftlog.node.write_path import WritePath
from raftlog.store.errors import InvalidMessageIdError, InvalidQueueIdError, UnknownTopicError

T = TypeVar("T")

# At most this long spent catching up before a "not found" answer (a heartbeat round and
# an apply take milliseconds; a member that cannot pass in a second answers what it holds).
CATCH_UP_MAX_S = 1.0
# The deadline left to answer in after catching up.
_ANSWER_MARGIN_S = 0.05
MAYBE_BEHIND: tuple[type[Exception], ...] = (UnknownTopicError, InvalidQueueIdError)
MAYBE_BEHIND_MESSAGE: tuple[type[Exception], ...] = (*MAYBE_BEHIND, InvalidMessageIdError)


def read_fresh(
    write_path: WritePath,
    context: grpc.ServicerContext,
    read: Callable[[], T],
    maybe_behind: tuple[type[Exception], ...] = MAYBE_BEHIND,
) -> T:
    """``read()``; if it says that what it names does not exist, catch up once and read
    again (see the module rules)."""
    try:
        return read()
    except maybe_behind:
        if not catch_up(write_path, context):
            raise
    return read()


def catch_up(write_path: WritePath, context: grpc.ServicerContext) -> bool:
    """Pass the read barrier within ``CATCH_UP_MAX_S`` and the call's deadline; whether it
    passed (this member then holds everything acknowledged before the call)."""
    remaining_s = context.time_remaining()
    budget_s = CATCH_UP_MAX_S
    if remaining_s is not None:
        budget_s = min(budget_s, remaining_s - _ANSWER_MARGIN_S)
    return budget_s > 0 and write_path.catch_up(budget_s)
