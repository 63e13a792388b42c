"""The client's decoding of a fast Pull's ``records``: every message equals what the original
form (a StoredMessage built by the server, ``node.wire.stored_message``) gives, hosts and
message ids included (IPv4 and IPv6), on the fast path (IPv4, one topic) and the general one
alike; a corrupt record is refused with a clear error, the general path's, and no message of
the answer is handed over."""

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.client.consumer import Consumer
from raftlog.client.errors import InternalError, RaftlogError
from raftlog.client.messages import Message
from raftlog.client.pulled_records import messages_from_records
from raftlog.client.record_columns import record_columns
from raftlog.node.services.wire import stored_message
from raftlog.proto import client_pb2
from raftlog.store.record import decode_record, encode_record
from tests.support import make_record, records
from tests.unit.client.fake_server import FakeServer

RECORDS = [
    make_record(
        topic="orders",
        queue_offset=4,
        physical_offset=1000,
        body=b"first",
        properties=(("TAGS", "red"), ("UNIQ_KEY", "U-1"), ("KEYS", "k1  k2"), ("origin", "t")),
        flag=3,
    ),
    make_record(
        topic="orders",
        queue_offset=5,
        physical_offset=2000,
        body=b"x" * 1024,
        born_host=("::ffff:10.0.0.1", 6000),
        store_host=("2001:db8::7", 10911),
        sys_flag=0x2,
        reconsume_times=1,
        prepared_transaction_offset=42,
    ),
    make_record(
        topic="orders",
        queue_offset=6,
        physical_offset=3000,
        body=b"",
        store_host=("10.1.2.3", 7702),
        properties=(("a", ""), ("TAGS", "blue")),
    ),
]


def test_decoded_messages_equal_the_original_forms() -> None:
    encoded = [encode_record(record) for record in RECORDS]
    expected = [Message.from_proto(stored_message(decode_record(e))) for e in encoded]
    assert messages_from_records(b"".join(encoded)) == expected
    assert expected[0].msg_id.endswith(f"{1000:016X}")
    assert expected[1].store_host == "[2001:db8::7]:10911"
    assert messages_from_records(b"") == []


def _original_forms(encoded: list[bytes]) -> list[Message]:
    return [Message.from_proto(stored_message(decode_record(e))) for e in encoded]


@settings(max_examples=60, deadline=None)
@given(st.lists(records(), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_the_fast_path_equals_the_original_forms(drawn: list[Any], address: int) -> None:
    # One topic and IPv4 hosts: the shape every pull of one queue has, and the fast path's.
    ip = ".".join(str(address >> shift & 0xFF) for shift in (24, 16, 8, 0))
    same = [
        dataclasses.replace(
            record,
            topic=drawn[0].topic,
            born_host=(ip, record.born_host[1] & 0xFFFF),
            store_host=("10.0.0.7", record.store_host[1] & 0xFFFF),
            physical_offset=abs(record.physical_offset) >> 1,  # what a message id can hold
        )
        for record in drawn
    ]
    encoded = [encode_record(record) for record in same]
    assert record_columns(b"".join(encoded)) is not None  # the fast path takes these
    assert messages_from_records(b"".join(encoded)) == _original_forms(encoded)


def test_hosts_that_change_within_an_answer_are_read_for_every_record() -> None:
    # The fast path keeps the last hosts at hand: a change of address or of port alone counts.
    hosts = [("10.0.0.1", 7701), ("10.0.0.2", 7701), ("10.0.0.2", 7702), ("10.0.0.1", 7701)]
    encoded = [
        encode_record(
            make_record(
                topic="t",
                physical_offset=100 * index,
                born_host=hosts[(index + 1) % len(hosts)],
                store_host=hosts[index],
            )
        )
        for index in range(len(hosts))
    ]
    assert record_columns(b"".join(encoded)) is not None
    decoded = messages_from_records(b"".join(encoded))
    assert decoded == _original_forms(encoded)
    assert [m.store_host for m in decoded] == [f"{ip}:{port}" for ip, port in hosts]
    assert len({m.msg_id[:-16] for m in decoded}) == 3


def test_a_corrupt_record_of_the_fast_path_gets_the_general_paths_error() -> None:
    ipv4 = [RECORDS[0], RECORDS[2]]
    encoded = [bytearray(encode_record(record)) for record in ipv4]
    assert record_columns(b"".join(map(bytes, encoded))) is not None
    encoded[1][100] ^= 0x10  # a byte past the header of the second record
    with pytest.raises(InternalError, match=r"record 1: .*CRC"):
        messages_from_records(b"".join(encoded))
    # Properties a reader refuses, under a trailer that checks out: declined, then named.
    bad = encode_record(make_record(properties=(("a\x01b", "c"),)))
    with pytest.raises(InternalError, match=r"record 0: .*not one key"):
        messages_from_records(bad)


def test_a_corrupt_record_is_refused_and_none_is_returned() -> None:
    encoded = [bytearray(encode_record(record)) for record in RECORDS]
    encoded[1][200] ^= 0x10  # a body byte of the second record
    with pytest.raises(InternalError) as raised:
        messages_from_records(b"".join(encoded))
    message = str(raised.value)
    assert "corrupt" in message and "record 1" in message and "body CRC" in message
    assert isinstance(raised.value, RaftlogError)


def test_a_damaged_header_byte_is_caught_by_the_record_crc() -> None:
    encoded = bytearray(encode_record(RECORDS[0]))
    encoded[25] ^= 0x01  # queue_offset: every length still agrees, the body CRC too
    with pytest.raises(InternalError, match="record CRC"):
        messages_from_records(bytes(encoded))


def test_the_consumer_refuses_an_answer_whose_record_count_disagrees() -> None:
    records = b"".join(encode_record(record) for record in RECORDS)
    fake = FakeServer().start()

    def describe(request: Any, context: Any) -> Any:
        return client_pb2.DescribeTopicResponse(
            topic=client_pb2.TopicInfo(name=request.topic, queue_count=1),
            queues=[client_pb2.QueueInfo(queue_id=0, min_queue_offset=0, max_queue_offset=7)],
        )

    def pull(request: Any, context: Any) -> Any:
        assert request.return_records
        return client_pb2.PullResponse(
            status=client_pb2.PULL_STATUS_FOUND,
            records=records,
            record_count=len(RECORDS) + 1,  # one record lost on the way
            next_queue_offset=7,
            max_queue_offset=7,
        )

    fake.hooks.update(DescribeTopic=describe, Pull=pull)
    try:
        with Consumer([fake.address], "g", "orders", from_beginning=True) as consumer:
            with pytest.raises(InternalError, match="holds 3 records but says 4"):
                consumer.poll(0.05)
            assert consumer.positions == {0: 0}
    finally:
        fake.stop()


def test_a_malformed_property_under_a_good_crc_gets_the_general_paths_error() -> None:
    # A value holding the name/value separator: the trailer CRC checks out, the pair does not.
    encoded = encode_record(make_record(properties=(("a", "b\x01c"),)))
    assert record_columns(encoded) is not None  # the fast path takes it, then declines
    with pytest.raises(InternalError, match=r"record 0: property .* is not one key"):
        messages_from_records(encoded)
