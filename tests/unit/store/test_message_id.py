import pytest

from raftlog.store.errors import InvalidMessageIdError
from raftlog.store.message_id import decode_message_id, encode_message_id, message_id_encoder
from tests.support import load_vectors

VECTOR = load_vectors()["offset_message_id"]


def test_encode_matches_vector() -> None:
    host = (VECTOR["store_host"][0], VECTOR["store_host"][1])
    assert encode_message_id(host, VECTOR["physical_offset"]) == VECTOR["id"]


def test_decode_matches_vector() -> None:
    host, physical_offset = decode_message_id(VECTOR["id"])
    assert host == (VECTOR["store_host"][0], VECTOR["store_host"][1])
    assert physical_offset == VECTOR["physical_offset"]


def test_decode_accepts_lowercase() -> None:
    assert decode_message_id(VECTOR["id"].lower())[1] == VECTOR["physical_offset"]


def test_ipv6_round_trip() -> None:
    message_id = encode_message_id(("::1", 8080), 2**40 + 5)
    assert len(message_id) == 56
    assert decode_message_id(message_id) == (("::1", 8080), 2**40 + 5)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "7F00",
        VECTOR["id"] + "0",
        "Z" * 32,
        "7F00000100002A9F000000000000100G",
        " " * 32,
        "7F000001FFFFFFFF0000000000001000",
    ],
)
def test_decode_rejects_malformed(bad: str) -> None:
    with pytest.raises(InvalidMessageIdError):
        decode_message_id(bad)


def test_encoder_for_fixed_host_matches_encode() -> None:
    encode = message_id_encoder(("10.1.2.3", 10911))
    for physical_offset in (0, 4096, 2**63 - 1):
        assert encode(physical_offset) == encode_message_id(("10.1.2.3", 10911), physical_offset)
    assert message_id_encoder(("::1", 1))(7) == encode_message_id(("::1", 1), 7)
