"""Conversions between the client API's messages (client.proto) and the store's types, and the
stateless checks of request fields.

What is here:
- ``stored_message``: a store ``MessageRecord`` -> ``StoredMessage`` (every record field).
- ``store_messages``: ``ProduceMessage``s -> store ``Message``s, with the queue picked as
  client.proto says (explicit id; ``crc32(sharding_key) % queue_count``; else round robin per
  topic through ``QueueSelector``) and the born host taken from the gRPC peer.
- ``produce_response``: the write path's ``ProduceOutcome`` -> ``ProduceResponse``.
- Request checks: negative ids, offsets and timestamps, sys_flag bits, both-or-neither of
  ``messages``/``records``, names of topics and groups.

Rules this module keeps:
- Stateless checks only (a field's form, never whether a topic exists): those belong to the
  store and the write path, which see the replicated state.
- A malformed field raises node.errors' ``InvalidRequestError`` (INVALID_ARGUMENT, errors.proto;
  the write path raises the same type) whose message names the field (and the message's index
  in a batch) and the rule it breaks.
- Responses never hold a negative offset or timestamp (client.proto Conventions): negative
  values are refused on the way in.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import re
import threading
import zlib
from collections.abc import Callable, Sequence

from raftlog.node.control import RESERVED_TOPIC_PREFIX, is_reserved_topic
from raftlog.node.errors import InvalidRequestError
from raftlog.node.messaging.retry import is_node_written_topic
from raftlog.node.write_path import ProduceOutcome
from raftlog.proto import client_pb2
from raftlog.store.errors import InvalidMessageIdError
from raftlog.store.message_id import decode_message_id, message_id_encoder
from raftlog.store.message_store import Message
from raftlog.store.record import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    RECORD_CRC_TRAILER_BYTES,
    MessageRecord,
    encode_properties,
)
from raftlog.store.validation import Limits, validate_topic

# ProduceMessage.sys_flag: compressed (0x1), multi-tags (0x2), transaction (0x4, 0x8, 0xC). The
# host bits (0x10, 0x20) are derived from the hosts by the record itself.
ALLOWED_SYS_FLAG_BITS = 0x1 | 0x2 | 0x4 | 0x8
# Where a message's born host comes from when the gRPC peer is not an IP (unix socket, test).
UNKNOWN_BORN_HOST = ("0.0.0.0", 0)
# A Pull tag list holding this matches every message (client.proto PullRequest.tags).
ALL_TAGS = "*"

_PROMOTED_PROPERTIES = frozenset((PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY))
# The fixed part of a record with two IPv4 hosts, up to and including body_length
# (docs/store-format.md); an IPv6 host adds 12 bytes. Topic length (1) + properties length (2).
_RECORD_FIXED_BYTES_IPV4 = 88
_IPV6_EXTRA_BYTES = 12
_RECORD_LENGTH_FIELDS_BYTES = 3
_GROUP_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")


# ---------------------------------------------------------------------- request checks


def require_non_negative(value: int, field_name: str) -> None:
    """client.proto Conventions: a negative id, offset or timestamp is refused."""
    if value < 0:
        raise InvalidRequestError(f"{field_name} must be >= 0, got {value}")


def require_topic_name(topic: str, limits: Limits) -> None:
    """A well-formed topic name (InvalidTopicError otherwise, as the store raises it). Reads
    check it first: a malformed name is INVALID_ARGUMENT, not an unknown topic."""
    validate_topic(topic, limits)


def require_client_topic(topic: str, limits: Limits) -> None:
    """A topic a client may write to or create: well-formed, not reserved for raftlog, and
    not one the node writes for delay, retry, dead letters and transactions
    (node/messaging/retry.py)."""
    validate_topic(topic, limits)
    if is_reserved_topic(topic):
        raise InvalidRequestError(
            f"topic {topic!r}: names starting with {RESERVED_TOPIC_PREFIX!r} are reserved for "
            "raftlog's own use"
        )
    if is_node_written_topic(topic):
        raise InvalidRequestError(
            f"topic {topic!r} is written only by the node: send with delay_level or "
            "deliver_at_ms for a delay, Consumer.reconsume_later for a retry, `raftlog dlq "
            "resend` to send a dead letter back, Producer.send_in_transaction for a "
            "transaction"
        )


def require_group_name(group: str, limits: Limits) -> None:
    """Consumer group names follow the topic rules (client.proto CommitOffsetsRequest.group)."""
    if not group:
        raise InvalidRequestError("group is empty")
    if len(group) > limits.max_topic_chars:
        raise InvalidRequestError(
            f"group {group[:40]!r}... is {len(group)} characters; the limit is "
            f"{limits.max_topic_chars}"
        )
    if not _GROUP_PATTERN.fullmatch(group):
        raise InvalidRequestError(f"group {group!r} has characters outside [%|a-zA-Z0-9_-]")
    if is_reserved_topic(group):
        raise InvalidRequestError(
            f"group {group!r}: names starting with {RESERVED_TOPIC_PREFIX!r} are raftlog's own "
            "(the delay scheduler's progress)"
        )


def require_messages_or_records(request: client_pb2.ProduceRequest) -> None:
    """Exactly one of ``messages`` and ``records`` (an empty batch sets neither)."""
    has_messages = len(request.messages) > 0
    has_records = len(request.records) > 0
    if has_messages and has_records:
        raise InvalidRequestError("set exactly one of messages and records, not both")
    if not has_messages and not has_records:
        raise InvalidRequestError("the batch is empty: set messages or records")


def require_producer_identity(producer_id: str, sequence: int, max_producer_id_bytes: int) -> None:
    """An idempotent producer's id fits the limit and its sequences start at 1."""
    size_bytes = len(producer_id.encode())
    if size_bytes > max_producer_id_bytes:
        raise InvalidRequestError(
            f"producer_id is {size_bytes} bytes; the limit is {max_producer_id_bytes}"
        )
    if producer_id and sequence == 0:
        raise InvalidRequestError("sequence must be >= 1 when producer_id is set")


def physical_offset_of_message_id(msg_id: str) -> int:
    """The physical offset an offset message id names; a malformed id (not 32 hex digits, or
    56 for an IPv6 store host) is INVALID_ARGUMENT, unlike an id that names no record."""
    try:
        return decode_message_id(msg_id)[1]
    except InvalidMessageIdError as error:
        raise InvalidRequestError(str(error)) from None


def tag_filter(tags: Sequence[str]) -> frozenset[str] | None:
    """Pull's tag filter: None (every message) when empty or holding "*"."""
    if not tags or ALL_TAGS in tags:
        return None
    return frozenset(tags)


# ---------------------------------------------------------------------- records -> API


@functools.lru_cache(maxsize=64)
def _message_id_encoder(store_host: tuple[str, int]) -> Callable[[int], str]:
    """One encoder per store host: a cluster has a few, and parsing the address for every
    pulled message cost about a third of building a StoredMessage."""
    return message_id_encoder(store_host)


def stored_message(record: MessageRecord) -> client_pb2.StoredMessage:
    """Every field of a stored record; KEYS, TAGS and UNIQ_KEY in their own fields."""
    return client_pb2.StoredMessage(
        topic=record.topic,
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
        physical_offset=record.physical_offset,
        msg_id=_message_id_encoder(record.store_host)(record.physical_offset),
        born_timestamp_ms=record.born_timestamp_ms,
        store_timestamp_ms=record.store_timestamp_ms,
        born_host=client_pb2.HostPort(ip=record.born_host[0], port=record.born_host[1]),
        store_host=client_pb2.HostPort(ip=record.store_host[0], port=record.store_host[1]),
        flag=record.flag,
        sys_flag=record.sys_flag,
        reconsume_times=record.reconsume_times,
        keys=record.keys,
        tags=record.tags,
        uniq_key=record.get_property(PROPERTY_UNIQ_KEY) or "",
        properties=[
            client_pb2.Property(name=name, value=value)
            for name, value in record.properties
            if name not in _PROMOTED_PROPERTIES
        ],
        body=record.body,
        prepared_transaction_offset=record.prepared_transaction_offset,
        store_size_bytes=stored_record_size_bytes(record),
        body_crc=zlib.crc32(record.body),
    )


def stored_record_size_bytes(record: MessageRecord) -> int:
    """The record's total_size in the CommitLog. The store reads records only with their
    ``__CRC32#`` trailer (which decoding strips from ``properties``), so it is counted back.
    Computed from the fields because a read record does not carry its size."""
    fixed_bytes = _RECORD_FIXED_BYTES_IPV4
    for host, _ in (record.born_host, record.store_host):
        if ":" in host:
            fixed_bytes += _IPV6_EXTRA_BYTES
    return (
        fixed_bytes
        + len(record.body)
        + _RECORD_LENGTH_FIELDS_BYTES
        + len(record.topic.encode())
        + len(encode_properties(record.properties))
        + RECORD_CRC_TRAILER_BYTES
    )


def produce_response(outcome: ProduceOutcome) -> client_pb2.ProduceResponse:
    return client_pb2.ProduceResponse(
        results=[
            client_pb2.ProduceResult(
                queue_id=queue_id,
                queue_offset=result.queue_offset,
                physical_offset=result.physical_offset,
                msg_id=result.msg_id,
            )
            for result, queue_id in zip(outcome.results, outcome.queue_ids, strict=True)
        ],
        store_timestamp_ms=outcome.store_timestamp_ms,
        duplicate=outcome.duplicate,
        raft_index=outcome.raft_index,
        raft_term=outcome.raft_term,
        send_status=_SEND_STATUSES[outcome.replication_status],
    )


# ProduceOutcome.replication_status (RocketMQ's SendStatus names) -> the API's enum.
_SEND_STATUSES = {
    "SEND_OK": client_pb2.SEND_STATUS_OK,
    "FLUSH_SLAVE_TIMEOUT": client_pb2.SEND_STATUS_FLUSH_SLAVE_TIMEOUT,
    "SLAVE_NOT_AVAILABLE": client_pb2.SEND_STATUS_SLAVE_NOT_AVAILABLE,
}


# ---------------------------------------------------------------------- API -> store


def born_host_from_peer(peer: str | None) -> tuple[str, int]:
    """The born host of a produced message: the gRPC peer ("ipv4:10.0.0.5:5555",
    "ipv6:[::1]:5555"); ``UNKNOWN_BORN_HOST`` for any other kind of peer. An IPv4-mapped IPv6
    peer is stored as IPv4 (a smaller record, and the address the producer really has)."""
    if not peer:
        return UNKNOWN_BORN_HOST
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        host, _, port_text = rest.rpartition(":")
    elif kind == "ipv6" and rest.startswith("["):
        host, _, port_text = rest[1:].partition("]:")
        # A link-local peer carries its zone ("fe80::1%eth0"); a record has no room for it.
        host = host.split("%", 1)[0]
    else:
        return UNKNOWN_BORN_HOST
    try:
        address = ipaddress.ip_address(host)
        port = int(port_text)
    except ValueError:
        return UNKNOWN_BORN_HOST
    if not 0 <= port <= 0xFFFF:
        return UNKNOWN_BORN_HOST
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped), port
    return str(address), port


class QueueSelector:
    """Picks the queue of a produced message that did not name one: crc32 of its sharding key
    modulo the queue count, else the topic's next queue in round robin. Thread-safe: servicer
    methods run on many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._round_robin: dict[str, itertools.count[int]] = {}

    def next_round_robin(self, topic: str, queue_count: int) -> int:
        with self._lock:
            counter = self._round_robin.get(topic)
            if counter is None:
                counter = self._round_robin[topic] = itertools.count()
            return next(counter) % queue_count

    @staticmethod
    def for_sharding_key(sharding_key: str, queue_count: int) -> int:
        return zlib.crc32(sharding_key.encode()) % queue_count


def store_messages(
    topic: str,
    messages: Sequence[client_pb2.ProduceMessage],
    *,
    queue_count_of: Callable[[str], int],
    selector: QueueSelector,
    born_host: tuple[str, int],
) -> list[Message]:
    """The store's Messages for a Produce batch. ``queue_count_of`` is asked (once) only when a
    message needs the queue count (sharding key or server-picked queue)."""
    queue_count: int | None = None
    converted: list[Message] = []
    for index, message in enumerate(messages):
        queue_kind = message.WhichOneof("queue")
        _check_produce_message(index, message, queue_kind)
        if queue_kind == "queue_id":
            queue_id = message.queue_id
        else:
            if queue_count is None:
                queue_count = queue_count_of(topic)
            if queue_kind == "sharding_key":
                queue_id = selector.for_sharding_key(message.sharding_key, queue_count)
            else:
                queue_id = selector.next_round_robin(topic, queue_count)
        converted.append(store_message(topic, queue_id, message, born_host))
    return converted


def store_message(
    topic: str, queue_id: int, message: client_pb2.ProduceMessage, born_host: tuple[str, int]
) -> Message:
    """One ProduceMessage as a store Message in ``queue_id`` (fields already checked)."""
    # Empty repeated fields (the common case) skip the tuple building: this runs per message.
    keys = message.keys
    properties = message.properties
    return Message(
        topic=topic,
        queue_id=queue_id,
        body=message.body,
        tags=message.tags,
        keys=tuple(keys) if keys else (),
        uniq_key=message.uniq_key,
        properties=tuple([(prop.name, prop.value) for prop in properties]) if properties else (),
        flag=message.flag,
        # 0 = the server's clock (client.proto); the store stamps it.
        born_timestamp_ms=message.born_timestamp_ms or None,
        born_host=born_host,
        sys_flag=message.sys_flag,
        reconsume_times=message.reconsume_times,
    )


def _check_produce_message(
    index: int, message: client_pb2.ProduceMessage, queue_kind: str | None
) -> None:
    # The field names are formatted only for an error: this runs once per produced message.
    where = "messages[{}].{}".format
    if queue_kind == "queue_id" and message.queue_id < 0:
        require_non_negative(message.queue_id, where(index, "queue_id"))
    if message.born_timestamp_ms < 0:
        require_non_negative(message.born_timestamp_ms, where(index, "born_timestamp_ms"))
    if message.reconsume_times < 0:
        require_non_negative(message.reconsume_times, where(index, "reconsume_times"))
    if message.sys_flag & ~ALLOWED_SYS_FLAG_BITS:
        raise InvalidRequestError(
            f"{where(index, 'sys_flag')} {message.sys_flag:#x} sets bits outside "
            f"{ALLOWED_SYS_FLAG_BITS:#x} (compressed, multi-tags, transaction); the host bits "
            "are derived from the hosts"
        )
