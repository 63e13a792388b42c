"""Checks a message must pass before anything is encoded or written (RocketMQ's limits).

Rules this module keeps:
- Every refusal is the specific ``StoreError`` subclass for its cause, and its message names
  the offending value (or its size) and the limit, so a client can tell what to change.
- Nothing here touches the disk or the clock; callers validate first, then write, so a refused
  message leaves no trace.
- Topic names are ``[%|a-zA-Z0-9_-]{1,127}``; property keys and values are strings that never
  contain the separator bytes \\x01 or \\x02, and no key may be the store's reserved
  ``__CRC32#``.
- Every other message field must fit the record's bytes as the format means it
  (``check_message_fields``): flag a signed 32-bit int, sys_flag, reconsume_times and the
  timestamps non-negative, a port 0..65535; a value of the wrong type is refused too, never
  silently converted. The common case costs one chained comparison; only a refusal works out
  which field broke the rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from raftlog.store.errors import (
    BodyTooLargeError,
    InvalidArgumentError,
    InvalidQueueIdError,
    InvalidTopicError,
    PropertiesTooLargeError,
)
from raftlog.store.record import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_RECORD_CRC,
    PROPERTY_SEPARATOR,
    RECORD_CRC_TRAILER_BYTES,
)

_TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_MAX_PORT = 0xFFFF


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-message limits; RocketMQ's defaults."""

    max_body_bytes: int = 4 * 1024 * 1024
    max_properties_bytes: int = 32767
    max_topic_chars: int = 127

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_properties_bytes", "max_topic_chars"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)}")
        # The record's properties_length field is 2 bytes; leave room for the CRC trailer.
        format_limit = 0xFFFF - RECORD_CRC_TRAILER_BYTES
        if self.max_properties_bytes > format_limit:
            raise ValueError(
                f"Limits.max_properties_bytes {self.max_properties_bytes} exceeds what the "
                f"record format holds ({format_limit})"
            )
        # The record's topic_length field is 1 byte.
        if self.max_topic_chars > 255:
            raise ValueError(f"Limits.max_topic_chars {self.max_topic_chars} exceeds 255")


def validate_topic(topic: str, limits: Limits) -> None:
    if not isinstance(topic, str):
        raise InvalidTopicError(f"topic must be a str, got {type(topic).__name__} {topic!r}")
    if not topic:
        raise InvalidTopicError("topic is empty")
    if len(topic) > limits.max_topic_chars:
        raise InvalidTopicError(
            f"topic {topic[:40]!r}... is {len(topic)} characters; the limit is "
            f"{limits.max_topic_chars}"
        )
    if not _TOPIC_PATTERN.fullmatch(topic):
        raise InvalidTopicError(f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]")


def validate_message(
    topic: str,
    queue_id: int,
    queue_count: int,
    body_len: int,
    properties_bytes_len: int,
    limits: Limits,
    *,
    properties: Iterable[tuple[str, str]] = (),
) -> None:
    """Refuse a message that breaks a limit; ``properties_bytes_len`` is the length of the
    encoded user properties (``encode_properties``), and ``properties`` (if given) are checked
    with ``validate_properties``."""
    validate_topic(topic, limits)
    validate_sizes(topic, queue_id, queue_count, body_len, properties_bytes_len, limits)
    validate_properties(properties)


def validate_sizes(
    topic: str,
    queue_id: int,
    queue_count: int,
    body_len: int,
    properties_bytes_len: int,
    limits: Limits,
) -> None:
    """``validate_message`` without the topic name and property checks (for a caller that
    checked the topic once per batch and the properties as it encoded them)."""
    if type(queue_id) is not int:
        raise InvalidQueueIdError(
            f"queue id must be an int, got {type(queue_id).__name__} {queue_id!r}"
        )
    if not 0 <= queue_id < queue_count:
        raise InvalidQueueIdError(
            f"queue id {queue_id} is outside [0, {queue_count}) for topic {topic!r}"
        )
    if body_len > limits.max_body_bytes:
        raise BodyTooLargeError(
            f"body is {body_len} bytes; the limit is {limits.max_body_bytes} (max_body_bytes)"
        )
    if properties_bytes_len > limits.max_properties_bytes:
        raise PropertiesTooLargeError(
            f"properties are {properties_bytes_len} bytes encoded; the limit is "
            f"{limits.max_properties_bytes} (max_properties_bytes)"
        )


def validate_properties(properties: Iterable[tuple[str, str]]) -> None:
    """Keys and values must be strings without the separators; no key may be the reserved
    one."""
    for key, value in properties:
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgumentError(
                f"property {key!r}: keys and values must be str, got "
                f"{type(key).__name__} and {type(value).__name__}"
            )
        if key == PROPERTY_RECORD_CRC:
            raise PropertiesTooLargeError(f"property key {key!r} is reserved by the store")
        for text, what in ((key, "key"), (value, "value")):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise PropertiesTooLargeError(
                    f"property {what} {text[:40]!r} contains a separator byte \\x01 or \\x02"
                )


def check_message_fields(
    flag: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> None:
    """Refuse (InvalidArgumentError, naming the field) a field the record cannot hold as the
    format means it; see the module rules."""
    try:
        if (
            -_INT32_MAX - 1 <= flag <= _INT32_MAX
            and 0 <= sys_flag <= _INT32_MAX
            and 0 <= born_timestamp_ms <= _INT64_MAX
            and 0 <= born_port <= _MAX_PORT
            and 0 <= reconsume_times <= _INT32_MAX
            and 0 <= prepared_transaction_offset <= _INT64_MAX
            and type(flag) is type(sys_flag) is type(born_timestamp_ms) is int
            and type(born_port) is type(reconsume_times) is int
            and type(prepared_transaction_offset) is int
        ):
            return
    except TypeError:
        pass  # a value that does not compare with ints: found below
    for name, value, low, high in (
        ("flag", flag, -_INT32_MAX - 1, _INT32_MAX),
        ("sys_flag", sys_flag, 0, _INT32_MAX),
        ("born_timestamp_ms", born_timestamp_ms, 0, _INT64_MAX),
        ("born_host port", born_port, 0, _MAX_PORT),
        ("reconsume_times", reconsume_times, 0, _INT32_MAX),
        ("prepared_transaction_offset", prepared_transaction_offset, 0, _INT64_MAX),
    ):
        if type(value) is not int:
            raise InvalidArgumentError(
                f"{name} must be an int, got {type(value).__name__} {value!r}"
            )
        if not low <= value <= high:
            raise InvalidArgumentError(f"{name} {value} is outside [{low}, {high}]")
    raise AssertionError("check_message_fields: no field broke a rule")


def validate_body(body: object, what: str = "body") -> None:
    """A body (or a block of records) is bytes-like (bytes, bytearray, memoryview); anything
    else is refused."""
    if not isinstance(body, bytes | bytearray | memoryview):
        raise InvalidArgumentError(
            f"{what} must be bytes, got {type(body).__name__}"
            + (" (encode the str first)" if isinstance(body, str) else "")
        )


def validate_group(group: str) -> None:
    """A consumer group is a non-empty str."""
    if not isinstance(group, str) or not group:
        raise InvalidArgumentError(f"consumer group must be a non-empty str, got {group!r}")
