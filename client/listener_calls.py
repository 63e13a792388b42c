"""What a push consumer's listener answers (``ConsumeResult``) and how an answer is taken:
one place for both delivery modes (client/push_consumer.py, client/orderly_dispatch.py).

Rules this module keeps:
- A listener that raises is logged (rate-limited, with the traceback) and counts as a
  refusal; a listener is never allowed to kill a pool thread or the puller.
- Concurrently (RocketMQ's ConsumeConcurrentlyStatus): CONSUME_SUCCESS accepts;
  RECONSUME_LATER and SUSPEND_CURRENT_QUEUE_A_MOMENT refuse (the message goes to the retry
  topic); anything that is not a ConsumeResult refuses too, with a warning.
- Orderly (ConsumeOrderlyStatus): CONSUME_SUCCESS accepts; SUSPEND_CURRENT_QUEUE_A_MOMENT
  refuses quietly (the same message comes again after a pause); any other answer or an
  exception refuses with a warning, since the queue waits behind that message.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from raftlog.client.messages import Message
from raftlog.client.rate_limited_log import RateLimitedLog

_log = logging.getLogger("raftlog.client.push_consumer")
# The listener raised (already logged): a refusal with nothing more to say.
_RAISED = object()


class ConsumeResult(enum.Enum):
    """What a push consumer's listener answers for a message (RocketMQ's
    ConsumeConcurrentlyStatus, and ConsumeOrderlyStatus's SUSPEND_CURRENT_QUEUE_A_MOMENT:
    orderly, the same message again after a pause; concurrently, as RECONSUME_LATER)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


Listener = Callable[[Message], ConsumeResult]


class ListenerCalls:
    """Calls ``listener`` for ``group``'s push consumer (see the module docstring)."""

    def __init__(self, listener: Listener, group: str) -> None:
        self.listener = listener
        self._group = group
        self.failures = RateLimitedLog(_log)

    def concurrently(self, message: Message) -> bool:
        """True when the listener accepted ``message``."""
        result = self._answer(message)
        if result is ConsumeResult.CONSUME_SUCCESS:
            return True
        if result is not _RAISED and not isinstance(result, ConsumeResult):
            self.failures.warning(
                "push consumer %s: the listener answered %r, not a ConsumeResult; taken as "
                "RECONSUME_LATER",
                self._group,
                result,
            )
        return False

    def orderly(self, message: Message) -> bool:
        """True when the listener accepted ``message``; False: offer it again later."""
        result = self._answer(message)
        if result is ConsumeResult.CONSUME_SUCCESS:
            return True
        if result is not ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT and result is not _RAISED:
            self.failures.warning(
                "push consumer %s: the orderly listener answered %r on %s queue %d offset %d; "
                "the message is offered again after a pause",
                self._group,
                result,
                message.topic,
                message.queue_id,
                message.queue_offset,
            )
        return False

    def _answer(self, message: Message) -> object:
        try:
            return self.listener(message)
        except Exception:
            self.failures.warning(
                "push consumer %s: the listener raised on %s (queue %d offset %d); it is "
                "consumed again later",
                self._group,
                message.topic,
                message.queue_id,
                message.queue_offset,
                exc_info=True,
            )
            return _RAISED
