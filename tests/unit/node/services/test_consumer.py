"""The Consumer read RPCs through a real gRPC server over a real MessageStore: Pull statuses,
tag filters and long polling, the three queries, and every bad input with its status code."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from raftlog.node.services.limits import ServiceLimits
from raftlog.proto import client_pb2
from raftlog.store.message_id import encode_message_id
from raftlog.store.message_store import Message
from tests.unit.node.services.conftest import (
    QUEUE_COUNT,
    TOPIC,
    Harness,
    call_status,
    message,
    start_harness,
)

PullStatus = client_pb2.PullStatus
Code = grpc.StatusCode


def pull(harness: Harness, **fields: object) -> client_pb2.PullResponse:
    request = client_pb2.PullRequest(topic=TOPIC, **fields)  # type: ignore[arg-type]
    response: client_pb2.PullResponse = harness.consumer.Pull(request, timeout=5)
    return response


def bodies(response: client_pb2.PullResponse) -> list[bytes]:
    return [stored.body for stored in response.messages]


def write_later(harness: Harness, delay_s: float, queue_id: int, body: bytes) -> threading.Thread:
    def write() -> None:
        time.sleep(delay_s)
        harness.put([message(queue_id, body)])

    thread = threading.Thread(target=write)
    thread.start()
    return thread


# ---------------------------------------------------------------------- Pull


def test_pull_found_returns_messages_in_order_with_bounds(harness: Harness) -> None:
    harness.put([message(1, f"m{i}".encode()) for i in range(5)])
    response = pull(harness, queue_id=1, queue_offset=1, max_messages=3)
    assert response.status == PullStatus.PULL_STATUS_FOUND
    assert bodies(response) == [b"m1", b"m2", b"m3"]
    assert [stored.queue_offset for stored in response.messages] == [1, 2, 3]
    assert (response.next_queue_offset, response.min_queue_offset) == (4, 0)
    assert response.max_queue_offset == 5


def test_pull_default_max_messages_is_32(harness: Harness) -> None:
    harness.put([message(0, b"x") for _ in range(40)])
    assert len(pull(harness, queue_id=0).messages) == 32


def test_pull_max_bytes_returns_at_least_one_message(harness: Harness) -> None:
    harness.put([message(0, b"x" * 1000) for _ in range(3)])
    response = pull(harness, queue_id=0, max_bytes=10)
    assert response.status == PullStatus.PULL_STATUS_FOUND
    assert len(response.messages) == 1
    assert response.next_queue_offset == 1


def test_pull_at_the_end_is_no_new_messages(harness: Harness) -> None:
    harness.put([message(2, b"a"), message(2, b"b")])
    response = pull(harness, queue_id=2, queue_offset=2)
    assert response.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
    assert not response.messages
    assert (response.next_queue_offset, response.max_queue_offset) == (2, 2)


def test_pull_empty_queue_is_no_new_messages(harness: Harness) -> None:
    response = pull(harness, queue_id=3, queue_offset=0)
    assert response.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
    assert response.next_queue_offset == 0


def test_pull_past_the_end_is_offset_too_large(harness: Harness) -> None:
    harness.put([message(0, b"a")])
    response = pull(harness, queue_id=0, queue_offset=7)
    assert response.status == PullStatus.PULL_STATUS_OFFSET_TOO_LARGE
    assert not response.messages
    assert response.next_queue_offset == 1
    assert response.max_queue_offset == 1


def test_pull_single_tag_filter(harness: Harness) -> None:
    harness.put(
        [
            message(0, b"a", tags="red"),
            message(0, b"b", tags="blue"),
            message(0, b"c", tags="red"),
            message(0, b"d"),
        ]
    )
    response = pull(harness, queue_id=0, tags=["red"])
    assert bodies(response) == [b"a", b"c"]
    assert all(stored.tags == "red" for stored in response.messages)
    assert response.next_queue_offset == 4


def test_pull_several_tags_and_star(harness: Harness) -> None:
    harness.put(
        [
            message(0, b"a", tags="red"),
            message(0, b"b", tags="blue"),
            message(0, b"c", tags="green"),
        ]
    )
    assert bodies(pull(harness, queue_id=0, tags=["green", "red"])) == [b"a", b"c"]
    assert bodies(pull(harness, queue_id=0, tags=["red", "*"])) == [b"a", b"b", b"c"]


def test_pull_no_matched_messages_moves_past_them(harness: Harness) -> None:
    harness.put([message(0, b"a", tags="blue"), message(0, b"b", tags="blue")])
    for tags in (["red"], ["red", "green"]):
        response = pull(harness, queue_id=0, tags=tags)
        assert response.status == PullStatus.PULL_STATUS_NO_MATCHED_MESSAGES
        assert not response.messages
        assert response.next_queue_offset == 2


# ---------------------------------------------------------------------- long polling


def test_long_poll_returns_when_a_message_arrives(harness: Harness) -> None:
    writer = write_later(harness, 0.2, 1, b"late")
    started = time.monotonic()
    response = pull(harness, queue_id=1, long_poll_timeout_ms=5000)
    elapsed_s = time.monotonic() - started
    writer.join()
    assert response.status == PullStatus.PULL_STATUS_FOUND
    assert bodies(response) == [b"late"]
    assert 0.15 <= elapsed_s < 1.5


def test_long_poll_times_out_with_no_new_messages(harness: Harness) -> None:
    started = time.monotonic()
    response = pull(harness, queue_id=1, long_poll_timeout_ms=300)
    elapsed_s = time.monotonic() - started
    assert response.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
    assert 0.25 <= elapsed_s < 1.0
    # It waited on the signal, slice by slice, not in a busy loop.
    assert 1 <= harness.signal.waits <= 20


def test_long_poll_ignores_other_queues_then_times_out(harness: Harness) -> None:
    writer = write_later(harness, 0.1, 2, b"elsewhere")
    response = pull(harness, queue_id=1, long_poll_timeout_ms=400)
    writer.join()
    assert response.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES


def test_long_poll_is_capped_by_the_server(harness: Harness) -> None:
    capped, server = start_harness(harness.store, ServiceLimits(max_long_poll_ms=200))
    try:
        started = time.monotonic()
        response = pull(capped, queue_id=0, long_poll_timeout_ms=60_000)
        assert response.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
        assert time.monotonic() - started < 1.0
    finally:
        capped.services.stop()
        capped.channel.close()
        server.stop(grace=None).wait()


def test_long_poll_answers_before_the_call_deadline(harness: Harness) -> None:
    request = client_pb2.PullRequest(topic=TOPIC, queue_id=0, long_poll_timeout_ms=60_000)
    started = time.monotonic()
    response = harness.consumer.Pull(request, timeout=0.5)
    assert response.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
    assert time.monotonic() - started < 0.5


def test_long_poll_returns_early_when_the_service_stops(harness: Harness) -> None:
    stopper = threading.Timer(0.2, harness.services.stop)
    stopper.start()
    started = time.monotonic()
    response = pull(harness, queue_id=0, long_poll_timeout_ms=10_000)
    stopper.join()
    assert response.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
    assert time.monotonic() - started < 1.0


def test_long_poll_with_a_tag_answers_no_matched_for_another_tag(harness: Harness) -> None:
    def write() -> None:
        time.sleep(0.1)
        harness.put([message(0, b"blue", tags="blue")])

    writer = threading.Thread(target=write)
    writer.start()
    response = pull(harness, queue_id=0, tags=["red"], long_poll_timeout_ms=3000)
    writer.join()
    assert response.status == PullStatus.PULL_STATUS_NO_MATCHED_MESSAGES
    assert response.next_queue_offset == 1


# ---------------------------------------------------------------------- queries


def test_query_by_key_finds_keys_and_uniq_key_newest_first(harness: Harness) -> None:
    harness.put(
        [
            message(0, b"first", keys=("order-1",)),
            message(1, b"second", keys=("order-1", "x")),
            message(2, b"other", keys=("order-2",), uniq_key="U-1"),
        ]
    )
    response = harness.consumer.QueryByKey(
        client_pb2.QueryByKeyRequest(topic=TOPIC, key="order-1"), timeout=5
    )
    assert sorted(stored.body for stored in response.messages) == [b"first", b"second"]
    offsets = [stored.physical_offset for stored in response.messages]
    assert offsets == sorted(offsets, reverse=True)
    by_uniq = harness.consumer.QueryByKey(
        client_pb2.QueryByKeyRequest(topic=TOPIC, key="U-1", max_messages=5), timeout=5
    )
    assert [stored.uniq_key for stored in by_uniq.messages] == ["U-1"]


def test_query_by_key_window(harness: Harness) -> None:
    harness.put([message(0, b"k", keys=("k1",))])
    stored_ms = (
        harness.consumer.Pull(client_pb2.PullRequest(topic=TOPIC, queue_id=0), timeout=5)
        .messages[0]
        .store_timestamp_ms
    )
    after = client_pb2.QueryByKeyRequest(topic=TOPIC, key="k1", begin_timestamp_ms=stored_ms + 1)
    assert not harness.consumer.QueryByKey(after, timeout=5).messages
    inside = client_pb2.QueryByKeyRequest(
        topic=TOPIC, key="k1", begin_timestamp_ms=stored_ms, end_timestamp_ms=stored_ms
    )
    assert len(harness.consumer.QueryByKey(inside, timeout=5).messages) == 1


def test_query_offset_by_time(harness: Harness) -> None:
    harness.put([message(0, b"a")])
    time.sleep(0.01)
    harness.put([message(0, b"b")])
    first, second = pull(harness, queue_id=0).messages

    def offset_for(timestamp_ms: int) -> int:
        request = client_pb2.QueryOffsetByTimeRequest(
            topic=TOPIC, queue_id=0, timestamp_ms=timestamp_ms
        )
        response = harness.consumer.QueryOffsetByTime(request, timeout=5)
        return int(response.queue_offset)

    assert offset_for(0) == 0  # every live message is newer: min_queue_offset
    assert offset_for(first.store_timestamp_ms) == 0
    assert offset_for(second.store_timestamp_ms) == 1
    assert offset_for(second.store_timestamp_ms + 1) == 2  # none is: max_queue_offset


def test_query_by_message_id(harness: Harness) -> None:
    (result,) = harness.put([message(3, b"by id", keys=("id-key",))])
    for msg_id in (result.msg_id, result.msg_id.lower()):
        response = harness.consumer.QueryByMessageId(
            client_pb2.QueryByMessageIdRequest(msg_id=msg_id), timeout=5
        )
        assert response.message.body == b"by id"
        assert response.message.msg_id == result.msg_id
        assert response.message.queue_id == 3


# ---------------------------------------------------------------------- bad input


BAD_TOPICS = ["", "x" * 128, "bad topic", "slash/topic"]


@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_malformed_topic_is_invalid_argument_on_every_read(harness: Harness, topic: str) -> None:
    consumer = harness.consumer
    assert call_status(consumer.Pull, client_pb2.PullRequest(topic=topic)) == (
        Code.INVALID_ARGUMENT
    )
    assert call_status(consumer.QueryByKey, client_pb2.QueryByKeyRequest(topic=topic, key="k")) == (
        Code.INVALID_ARGUMENT
    )
    assert call_status(
        consumer.QueryOffsetByTime, client_pb2.QueryOffsetByTimeRequest(topic=topic)
    ) == (Code.INVALID_ARGUMENT)


def test_unknown_topic_is_not_found_on_every_read(harness: Harness) -> None:
    consumer = harness.consumer
    assert call_status(consumer.Pull, client_pb2.PullRequest(topic="nope")) == Code.NOT_FOUND
    assert (
        call_status(consumer.QueryByKey, client_pb2.QueryByKeyRequest(topic="nope", key="k"))
        == Code.NOT_FOUND
    )
    assert (
        call_status(consumer.QueryOffsetByTime, client_pb2.QueryOffsetByTimeRequest(topic="nope"))
        == Code.NOT_FOUND
    )
    # Each first tried to catch up with the group (a follower may only be behind).
    assert harness.signal.catch_ups == 3


def test_a_read_that_finds_its_topic_does_not_catch_up(harness: Harness) -> None:
    harness.put([Message(TOPIC, 0, b"x")])
    pulled = harness.consumer.Pull(client_pb2.PullRequest(topic=TOPIC, queue_id=0), timeout=5)
    assert len(pulled.messages) == 1
    assert harness.signal.catch_ups == 0


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (client_pb2.PullRequest(topic=TOPIC, queue_id=-1), Code.INVALID_ARGUMENT),
        (client_pb2.PullRequest(topic=TOPIC, queue_id=QUEUE_COUNT), Code.NOT_FOUND),
        (client_pb2.PullRequest(topic=TOPIC, queue_id=0, queue_offset=-1), Code.INVALID_ARGUMENT),
    ],
)
def test_pull_bad_queue_or_offset(
    harness: Harness, request_: client_pb2.PullRequest, code: grpc.StatusCode
) -> None:
    assert call_status(harness.consumer.Pull, request_) == code


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"queue_id": -1}, Code.INVALID_ARGUMENT),
        ({"queue_id": QUEUE_COUNT}, Code.NOT_FOUND),
        ({"timestamp_ms": -5}, Code.INVALID_ARGUMENT),
    ],
)
def test_query_offset_by_time_bad_input(
    harness: Harness, fields: dict[str, int], code: grpc.StatusCode
) -> None:
    request = client_pb2.QueryOffsetByTimeRequest(topic=TOPIC, **fields)
    assert call_status(harness.consumer.QueryOffsetByTime, request) == code


@pytest.mark.parametrize(
    "fields",
    [
        {"key": ""},
        {"key": "k", "begin_timestamp_ms": -1},
        {"key": "k", "end_timestamp_ms": -1},
        {"key": "k", "begin_timestamp_ms": 10, "end_timestamp_ms": 5},
    ],
)
def test_query_by_key_bad_input(harness: Harness, fields: dict[str, object]) -> None:
    request = client_pb2.QueryByKeyRequest(topic=TOPIC, **fields)  # type: ignore[arg-type]
    assert call_status(harness.consumer.QueryByKey, request) == Code.INVALID_ARGUMENT


@pytest.mark.parametrize("msg_id", ["", "XYZ", "0" * 31, "G" * 32, "0" * 33])
def test_malformed_message_id_is_invalid_argument(harness: Harness, msg_id: str) -> None:
    request = client_pb2.QueryByMessageIdRequest(msg_id=msg_id)
    assert call_status(harness.consumer.QueryByMessageId, request) == Code.INVALID_ARGUMENT


def test_message_id_pointing_at_nothing_is_not_found(harness: Harness) -> None:
    (result,) = harness.put([message(0, b"one")])
    host = ("127.0.0.1", 10911)
    for physical_offset in (result.physical_offset + 1, 1 << 40):
        request = client_pb2.QueryByMessageIdRequest(
            msg_id=encode_message_id(host, physical_offset)
        )
        assert call_status(harness.consumer.QueryByMessageId, request) == Code.NOT_FOUND


@pytest.mark.parametrize(
    "request_",
    [
        client_pb2.CommitOffsetsRequest(group="", offsets=[client_pb2.QueueOffset(topic=TOPIC)]),
        client_pb2.CommitOffsetsRequest(group="bad group"),
        client_pb2.CommitOffsetsRequest(group="g"),
        client_pb2.CommitOffsetsRequest(
            group="g", offsets=[client_pb2.QueueOffset(topic=TOPIC, queue_offset=-1)]
        ),
        client_pb2.CommitOffsetsRequest(
            group="g", offsets=[client_pb2.QueueOffset(topic=TOPIC, queue_id=-1)]
        ),
        client_pb2.CommitOffsetsRequest(
            group="g", offsets=[client_pb2.QueueOffset(topic="", queue_offset=1)]
        ),
        client_pb2.CommitOffsetsRequest(
            group="g",
            offsets=[client_pb2.QueueOffset(topic=TOPIC), client_pb2.QueueOffset(topic=TOPIC)],
        ),
    ],
)
def test_commit_offsets_bad_input_is_refused_before_the_write_path(
    harness: Harness, request_: client_pb2.CommitOffsetsRequest
) -> None:
    assert call_status(harness.consumer.CommitOffsets, request_) == Code.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "request_",
    [
        client_pb2.FetchOffsetsRequest(group=""),
        client_pb2.FetchOffsetsRequest(
            group="g", queues=[client_pb2.QueueRef(topic=TOPIC, queue_id=-1)]
        ),
        client_pb2.FetchOffsetsRequest(group="g", queues=[client_pb2.QueueRef(topic="a b")]),
    ],
)
def test_fetch_offsets_bad_input_is_refused_before_the_write_path(
    harness: Harness, request_: client_pb2.FetchOffsetsRequest
) -> None:
    assert call_status(harness.consumer.FetchOffsets, request_) == Code.INVALID_ARGUMENT


def test_query_by_key_answer_is_bounded_in_bytes(harness: Harness) -> None:
    harness.put([message(0, b"x" * 3000, keys=("big",)) for _ in range(5)])
    bounded, server = start_harness(harness.store, ServiceLimits(max_query_bytes=7000))
    try:
        request = client_pb2.QueryByKeyRequest(topic=TOPIC, key="big")
        assert len(bounded.consumer.QueryByKey(request, timeout=5).messages) == 2
        tiny, tiny_server = start_harness(harness.store, ServiceLimits(max_query_bytes=10))
        try:
            assert len(tiny.consumer.QueryByKey(request, timeout=5).messages) == 1
        finally:
            tiny.channel.close()
            tiny_server.stop(grace=None).wait()
    finally:
        bounded.channel.close()
        server.stop(grace=None).wait()
