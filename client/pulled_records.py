"""Pulled records to Messages: a fast Pull answer's ``records`` (the stored records' bytes,
back to back) turned into the ``Message`` objects a consumer hands out, verified first.

This runs once per consumed message, so it has a fast path and a general one:

- Fast: every record IPv4-hosted and of one topic, as ``record_columns`` checks them
  (structure, and the ``__CRC32#`` trailer, one CRC per record over every byte before it,
  the body and its ``body_crc`` included; the store refused a record whose body CRC did not
  match when it was written, so the body is not CRC'd twice). Each record's fixed fields
  are then read with one unpack, its properties with the store's ``decode_properties``, and
  its hosts converted only when they differ from the previous record's.
- General: anything else (an IPv6 host, several topics, a record that does not check out)
  goes through the store's ``decode_records``, which checks the body CRC too and names a
  corrupt record. The fast path never decides that data is corrupt: it only declines, so
  the error a caller sees is always the general path's.

Rules this module keeps: both paths give equal Messages for the same bytes (the unit tests
check it), with every field ``Message.from_proto`` gives; a corrupt record raises
InternalError and no message of the answer is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from raftlog.client.errors import InternalError
from raftlog.client.messages import Message, host_text
from raftlog.client.positional_constructor import positional_constructor
from raftlog.client.record_columns import HEADER_BYTES, HEADER_V4, TRAILER_BYTES, record_columns
from raftlog.store.errors import CorruptRecordError
from raftlog.store.message_id import message_id_encoder
from raftlog.store.record import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    decode_properties,
    decode_records,
    split_keys,
    unpack_address,
)

# Message(...) without the frozen __init__'s per-field cost (positional_constructor.py).
_new_message = positional_constructor(Message)


def messages_from_records(records: bytes) -> list[Message]:
    """The messages of a Pull answer's ``records`` (``return_records``), in order; a corrupt
    record raises InternalError naming it."""
    columns = record_columns(records)
    if columns is not None:
        try:
            return _from_columns(columns.topic, records, columns.starts, columns.properties_starts)
        except CorruptRecordError:
            pass  # properties a reader cannot decode: the general path names the record
    return _from_decoded(records)


def _from_columns(
    topic: str, records: bytes, starts: Sequence[int], properties_starts: Sequence[int]
) -> list[Message]:
    # The fields are taken by index and the Message built here, not through ``_message``:
    # this loop runs once per consumed message, and the call and its tuples were a fifth of it.
    hosts = _HostCache()
    unpack = HEADER_V4.unpack_from
    new_message = _new_message
    messages: list[Message] = []
    append = messages.append
    # A batch's records nearly always share their hosts: the last ones are kept at hand
    # (``starts`` is never empty: record_columns locates at least one record).
    first = unpack(records, starts[0])
    born_host = (first[9], first[10])
    born_text = hosts.born(born_host)
    store_host = (first[12], first[13])
    store_text, encode_id = hosts.store(store_host)
    for start, properties_start in zip(starts, properties_starts, strict=True):
        # total_size, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
        # born_timestamp, born ip, born port, store_timestamp, store ip, store port,
        # reconsume_times, prepared_transaction_offset, body_length.
        header = unpack(records, start)
        size_bytes = header[0]
        body_start = start + HEADER_BYTES
        keys, tags, uniq_key, properties = _promoted(
            decode_properties(records[properties_start : start + size_bytes - TRAILER_BYTES])
        )
        if header[9] != born_host[0] or header[10] != born_host[1]:
            born_host = (header[9], header[10])
            born_text = hosts.born(born_host)
        if header[12] != store_host[0] or header[13] != store_host[1]:
            store_host = (header[12], header[13])
            store_text, encode_id = hosts.store(store_host)
        physical_offset = header[6]
        append(
            new_message(
                topic,
                header[3],
                header[5],
                physical_offset,
                encode_id(physical_offset),
                records[body_start : body_start + header[16]],
                header[8],
                header[11],
                born_text,
                store_text,
                keys,
                tags,
                uniq_key,
                properties,
                header[4],
                header[7],
                header[14],
                header[15],
                size_bytes,
                header[2],
                "",
            )
        )
    return messages


# (keys, tags, uniq key, the other properties), as a Message holds them.
_Promoted = tuple[tuple[str, ...], str, str, tuple[tuple[str, str], ...]]


def _from_decoded(records: bytes) -> list[Message]:
    try:
        decoded = decode_records(records)
    except CorruptRecordError as error:
        raise InternalError(
            f"a pulled record is corrupt, so none of this answer's messages is returned: {error}"
        ) from None
    hosts = _HostCache()
    # A DecodedRecord: the 13 fields from queue_id on, size, body CRC, topic, body, properties.
    return [
        _message(hosts, row[15], row[:13], row[13], row[14], row[16], _promoted(row[17]))
        for row in decoded
    ]


def _message(
    hosts: _HostCache,
    topic: str,
    fixed: Sequence[Any],
    size_bytes: int,
    body_crc: int,
    body: bytes,
    promoted: _Promoted,
) -> Message:
    """The Message of one record: ``fixed`` is its fields from queue_id to
    prepared_transaction_offset, in the store's order."""
    (
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp_ms,
        born_address,
        born_port,
        store_timestamp_ms,
        store_address,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
    ) = fixed
    store_text, encode_id = hosts.store((store_address, store_port))
    keys, tags, uniq_key, properties = promoted
    return _new_message(
        topic,
        queue_id,
        queue_offset,
        physical_offset,
        encode_id(physical_offset),
        body,
        born_timestamp_ms,
        store_timestamp_ms,
        hosts.born((born_address, born_port)),
        store_text,
        keys,
        tags,
        uniq_key,
        properties,
        flag,
        sys_flag,
        reconsume_times,
        prepared_transaction_offset,
        size_bytes,
        body_crc,
        "",
    )


class _HostCache:
    """A batch has a few distinct hosts: each is converted (text, message id encoder) once."""

    def __init__(self) -> None:
        self._texts: dict[tuple[bytes, int], str] = {}
        self._stores: dict[tuple[bytes, int], tuple[str, Callable[[int], str]]] = {}

    def born(self, host: tuple[bytes, int]) -> str:
        text = self._texts.get(host)
        if text is None:
            text = self._texts[host] = host_text(unpack_address(host[0]), host[1])
        return text

    def store(self, host: tuple[bytes, int]) -> tuple[str, Callable[[int], str]]:
        """The store host's text and the offset message id encoder of its records."""
        known = self._stores.get(host)
        if known is None:
            ip = unpack_address(host[0])
            known = (host_text(ip, host[1]), message_id_encoder((ip, host[1])))
            self._stores[host] = known
        return known


def _promoted(all_properties: Sequence[tuple[str, str]]) -> _Promoted:
    """(keys, tags, uniq key, the other properties): the first value of each promoted
    property counts, as in StoredMessage."""
    keys: str | None = None
    tags: str | None = None
    uniq_key: str | None = None
    properties: list[tuple[str, str]] = []
    for pair in all_properties:
        name = pair[0]
        if name == PROPERTY_TAGS:
            if tags is None:
                tags = pair[1]
        elif name == PROPERTY_UNIQ_KEY:
            if uniq_key is None:
                uniq_key = pair[1]
        elif name == PROPERTY_KEYS:
            if keys is None:
                keys = pair[1]
        else:
            properties.append(pair)
    return split_keys(keys) if keys else (), tags or "", uniq_key or "", tuple(properties)
