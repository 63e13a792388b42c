"""A message to write, and the parts of its record the writer derives from it: the
properties as the record lays them out, and the hints dispatch needs (tag and key hashes).

Rules this module keeps: KEYS, TAGS and UNIQ_KEY come from their own fields and appear at most
once; everything a record cannot hold is refused with the StoreError for it (validation.py),
never a TypeError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raftlog.store.errors import InvalidArgumentError, PropertiesTooLargeError
from raftlog.store.hashing import key_hash, unit_tag_hash
from raftlog.store.record import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    split_keys,
)
from raftlog.store.validation import validate_properties

RESERVED_PROPERTY_KEYS = frozenset((PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY))


@dataclass(frozen=True, slots=True)
class Message:
    """One message to write. ``keys`` and ``uniq_key`` (the producer's unique id) are indexed
    for lookup by key; ``tags`` is filtered on by ``get_messages``."""

    topic: str
    queue_id: int
    body: bytes
    tags: str = ""
    keys: tuple[str, ...] = ()
    uniq_key: str = ""
    properties: tuple[tuple[str, str], ...] = ()
    flag: int = 0
    born_timestamp_ms: int | None = None
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


@dataclass(frozen=True, slots=True)
class PutResult:
    queue_offset: int
    physical_offset: int
    msg_id: str


# One record of a block to append: its topic/queue and its size in bytes.
BlockEntry = tuple[tuple[str, int], int]
# What the write path knows for dispatch of one record: its tag hash and key hashes.
DispatchHint = tuple[int, tuple[int, ...]]


def encode_message_properties(message: Message) -> bytes:
    """The record's properties, as ``encode_properties`` lays them out: KEYS, TAGS and
    UNIQ_KEY from their fields (when set), then the user's. Refuses what validation refuses."""
    if isinstance(message.keys, str):
        # A str is a sequence of one-character keys: never what the caller meant.
        raise InvalidArgumentError(
            f"keys must be a tuple of str, got the str {message.keys[:40]!r}; pass "
            "(key,) for one key"
        )
    for key in message.keys:
        if not isinstance(key, str):
            raise InvalidArgumentError(f"keys must be str, got {type(key).__name__} {key!r}")
        if not key or KEY_SEPARATOR in key:
            raise PropertiesTooLargeError(
                f"key {key[:40]!r} is empty or holds the KEYS separator {KEY_SEPARATOR!r}"
            )
    for name, value in (("tags", message.tags), ("uniq_key", message.uniq_key)):
        if not isinstance(value, str):
            raise InvalidArgumentError(
                f"{name} must be a str, got {type(value).__name__} {value!r}"
            )
    pairs = [
        (name, value)
        for name, value in (
            (PROPERTY_KEYS, KEY_SEPARATOR.join(message.keys)),
            (PROPERTY_TAGS, message.tags),
            (PROPERTY_UNIQ_KEY, message.uniq_key),
        )
        if value
    ]
    if not all(isinstance(pair, tuple) and len(pair) == 2 for pair in message.properties):
        raise InvalidArgumentError(
            f"properties must be (key, value) pairs, got {message.properties!r:.80}"
        )
    for name, _ in message.properties:
        if name in RESERVED_PROPERTY_KEYS:
            raise PropertiesTooLargeError(
                f"property {name!r} is set through Message.keys, .tags or .uniq_key"
            )
    pairs += message.properties
    text = "".join([f"{name}\x01{value}\x02" for name, value in pairs])
    # A separator inside a key or value shows as one too many; the reserved CRC key needs
    # the full check too (both are rare, so the common case counts two characters).
    if (
        text.count(NAME_VALUE_SEPARATOR) != len(pairs)
        or text.count(PROPERTY_SEPARATOR) != len(pairs)
        or message.properties
    ):
        validate_properties(pairs)
    try:
        return text.encode()
    except UnicodeEncodeError as error:
        raise InvalidArgumentError(
            f"properties, keys or tags hold text UTF-8 cannot encode: {error}"
        ) from error


def hint_of_properties(topic: str, properties: Sequence[tuple[str, str]]) -> DispatchHint:
    """The dispatch hint of a record with these (decoded) properties, as dispatch reading the
    record would find it (``read_dispatch_info``; each of TAGS, KEYS and UNIQ_KEY appears at
    most once, ``check_encoded``)."""
    found = {name: value for name, value in properties if name in RESERVED_PROPERTY_KEYS}
    key_hashes = tuple([key_hash(topic, key) for key in split_keys(found.get(PROPERTY_KEYS, ""))])
    uniq_key = found.get(PROPERTY_UNIQ_KEY, "")
    if uniq_key:
        key_hashes += (key_hash(topic, uniq_key),)
    return unit_tag_hash(topic, found.get(PROPERTY_TAGS, ""), properties), key_hashes
