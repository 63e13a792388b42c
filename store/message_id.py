"""Offset message ids: the store host and the record's physical offset, as uppercase hex.

Rules this module keeps:
- Layout (docs/store-format.md): host address (4 bytes IPv4, 16 bytes IPv6) | port (4) |
  physical_offset (8), big-endian, hex-encoded: 32 digits for IPv4, 56 for IPv6.
- Decoding is strict: anything malformed raises ``InvalidMessageIdError``, never another error.
- Replicas are byte-identical, so the physical offset is valid on every replica.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable

from raftlog.store.errors import InvalidMessageIdError

_PORT_AND_OFFSET = struct.Struct(">IQ")
_IPV4_ID_HEX_DIGITS = 2 * (4 + _PORT_AND_OFFSET.size)
_IPV6_ID_HEX_DIGITS = 2 * (16 + _PORT_AND_OFFSET.size)
_OFFSET_HEX_DIGITS = 16
_HEX_DIGITS = frozenset("0123456789ABCDEFabcdef")


def encode_message_id(store_host: tuple[str, int], physical_offset: int) -> str:
    """The offset message id of the record at ``physical_offset`` stored by ``store_host``."""
    address, port = store_host
    return (
        (ipaddress.ip_address(address).packed + _PORT_AND_OFFSET.pack(port, physical_offset))
        .hex()
        .upper()
    )


def decode_message_id(message_id: str) -> tuple[tuple[str, int], int]:
    """``(store_host, physical_offset)`` from an offset message id."""
    if not isinstance(message_id, str):
        raise InvalidMessageIdError(
            f"message id must be a str of hex digits, got {type(message_id).__name__}"
        )
    if len(message_id) not in (
        _IPV4_ID_HEX_DIGITS,
        _IPV6_ID_HEX_DIGITS,
    ) or not _HEX_DIGITS.issuperset(message_id):
        raise InvalidMessageIdError(
            f"message id must be {_IPV4_ID_HEX_DIGITS} or {_IPV6_ID_HEX_DIGITS} hex digits, "
            f"got {message_id!r}"
        )
    raw = bytes.fromhex(message_id)
    address_size = len(raw) - _PORT_AND_OFFSET.size
    port, physical_offset = _PORT_AND_OFFSET.unpack_from(raw, address_size)
    if port > 0xFFFF:
        raise InvalidMessageIdError(f"message id {message_id!r} holds port {port} > 65535")
    address = ipaddress.ip_address(raw[:address_size])
    return (str(address), port), physical_offset


def message_id_encoder(store_host: tuple[str, int]) -> Callable[[int], str]:
    """``encode_message_id`` for one fixed host, with the host part encoded once (the write
    path makes an id per message)."""
    prefix = encode_message_id(store_host, 0)[:-_OFFSET_HEX_DIGITS]
    # The prefix is hex digits, so it holds no "%". One bound ``%`` per id: half the time of
    # an f-string whose width is itself a field (consumers make an id per message they read).
    encode: Callable[[int], str] = f"{prefix}%0{_OFFSET_HEX_DIGITS}X".__mod__
    return encode
