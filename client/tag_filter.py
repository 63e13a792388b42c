"""Tag filter expressions for consumers: ``"*"`` (every message) or ``"TagA || TagB"``.

The grammar is RocketMQ's tag subscription (``FilterAPI.buildSubscriptionData``): tags joined
by ``||``, blanks around each ignored, ``"*"`` (or ``""``) meaning all messages. Where
RocketMQ quietly drops what it cannot use, this module refuses it with a ValueError that says
what is wrong, before any call reaches the cluster:
- an empty operand (``"TagA ||"``, ``"TagA |||| TagB"``), so a typo never widens or narrows a
  subscription without notice;
- ``"*"`` next to other tags (RocketMQ would subscribe to a literal tag ``*``);
- a tag holding whitespace or ``|`` (``"TagA | TagB"``, ``"TagA && TagB"``, ``"Tag A"``):
  only ``||`` joins tags, SQL92 filters are not offered;
- a tag holding ``\\x01`` or ``\\x02`` (the record's property separators: no stored
  message can carry one).

Rules this module keeps:
- The server filters a Pull by tag hash from the ConsumeQueue and then by the real tag string
  (client.proto PullRequest.tags); ``TagFilter.select`` re-checks the real tag on the client
  too, so a message whose tag only shares a hash with a wanted one never reaches the caller,
  whatever server answered.
- A filter is a frozen value: parse once, share freely between threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raftlog.client.messages import Message

ALL_TAGS = "*"
TAG_SEPARATOR = "||"
# The record's property separators (store/record.py): a stored tag never holds one.
_FORBIDDEN_CHARACTERS = ("\x01", "\x02")


@dataclass(frozen=True, slots=True)
class TagFilter:
    """Which tags a consumer wants: ``tags`` None means every message (also untagged ones);
    otherwise only messages whose tag is one of ``tags`` (an untagged message never
    matches)."""

    tags: frozenset[str] | None = None

    @classmethod
    def parse(cls, expression: str | Sequence[str]) -> TagFilter:
        """The filter of a RocketMQ-style expression (``"*"``, ``"TagA || TagB"``), or of a
        sequence of tags (``["TagA", "TagB"]``; ``[]`` or ``["*"]`` for all). Raises
        ValueError for a malformed one (see the module docstring)."""
        if isinstance(expression, str):
            text = expression.strip()
            if text in ("", ALL_TAGS):
                return cls(None)
            operands = [operand.strip() for operand in text.split(TAG_SEPARATOR)]
        elif isinstance(expression, Sequence):
            if not all(isinstance(tag, str) for tag in expression):
                raise TypeError(f"tags must be strings, got {expression!r}")
            operands = [tag.strip() for tag in expression]
            if operands in ([], [ALL_TAGS]):
                return cls(None)
        else:
            raise TypeError(
                f"tags must be an expression like 'TagA || TagB' or a sequence of tags, "
                f"not {type(expression).__name__}"
            )
        for operand in operands:
            _check_operand(operand, expression)
        return cls(frozenset(operands))

    @property
    def matches_all(self) -> bool:
        return self.tags is None

    @property
    def pull_tags(self) -> list[str]:
        """PullRequest.tags: [] for every message, else the wanted tags (sorted, so equal
        filters send equal requests)."""
        return [] if self.tags is None else sorted(self.tags)

    @property
    def expression(self) -> str:
        """The canonical expression: ``"*"`` or the tags, sorted, joined by ``" || "``."""
        return ALL_TAGS if self.tags is None else f" {TAG_SEPARATOR} ".join(self.pull_tags)

    def matches(self, tag: str) -> bool:
        """Whether a message with tag ``tag`` ("" = untagged) passes."""
        return self.tags is None or tag in self.tags

    def select(self, messages: list[Message]) -> list[Message]:
        """The messages whose real tag passes, in order (the client-side re-check)."""
        tags = self.tags
        if tags is None:
            return messages
        return [message for message in messages if message.tags in tags]


def _check_operand(operand: str, expression: str | Sequence[str]) -> None:
    where = f"in tag filter {expression!r}"
    if not operand:
        raise ValueError(
            f"empty tag {where}: join tags with ' || ' (e.g. 'TagA || TagB'), or use '*' for all"
        )
    if operand == ALL_TAGS:
        raise ValueError(f"'*' {where} stands alone: it already means every tag")
    if "|" in operand or any(c.isspace() for c in operand):
        raise ValueError(
            f"tag {operand!r} {where} holds '|' or whitespace: only ' || ' joins tags "
            "(SQL92 filters are not supported)"
        )
    if any(c in operand for c in _FORBIDDEN_CHARACTERS):
        raise ValueError(f"tag {operand!r} {where} holds \\x01 or \\x02, which no tag can hold")
