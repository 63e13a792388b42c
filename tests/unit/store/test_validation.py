import pytest

from raftlog.store.errors import (
    BodyTooLargeError,
    InvalidQueueIdError,
    InvalidTopicError,
    PropertiesTooLargeError,
)
from raftlog.store.validation import Limits, validate_message, validate_properties, validate_topic

LIMITS = Limits()


def test_defaults_are_rocketmqs() -> None:
    assert (LIMITS.max_body_bytes, LIMITS.max_properties_bytes, LIMITS.max_topic_chars) == (
        4 * 1024 * 1024,
        32767,
        127,
    )


def test_a_valid_message_passes() -> None:
    validate_message("Orders_%|-9", 3, 4, 4 * 1024 * 1024, 32767, LIMITS)


@pytest.mark.parametrize(
    ("topic", "message"),
    [
        ("", "empty"),
        ("t" * 128, "128 characters; the limit is 127"),
        ("orders.eu", "outside"),
        ("订单", "outside"),
        ("a b", "outside"),
        ("a\n", "outside"),
    ],
)
def test_bad_topics_are_refused_with_the_reason(topic: str, message: str) -> None:
    with pytest.raises(InvalidTopicError, match=message):
        validate_message(topic, 0, 1, 0, 0, LIMITS)
    with pytest.raises(InvalidTopicError):
        validate_topic(topic, LIMITS)


@pytest.mark.parametrize("queue_id", [-1, 4, 100])
def test_queue_id_must_be_below_the_queue_count(queue_id: int) -> None:
    with pytest.raises(InvalidQueueIdError, match=rf"{queue_id} is outside \[0, 4\)"):
        validate_message("orders", queue_id, 4, 0, 0, LIMITS)


def test_body_over_the_limit_is_refused_with_size_and_limit() -> None:
    with pytest.raises(BodyTooLargeError, match="4194305 bytes; the limit is 4194304"):
        validate_message("orders", 0, 1, 4 * 1024 * 1024 + 1, 0, LIMITS)
    with pytest.raises(BodyTooLargeError, match="11 bytes; the limit is 10"):
        validate_message("orders", 0, 1, 11, 0, Limits(max_body_bytes=10))


def test_properties_over_the_limit_are_refused() -> None:
    with pytest.raises(PropertiesTooLargeError, match="32768 bytes encoded; the limit is 32767"):
        validate_message("orders", 0, 1, 0, 32768, LIMITS)


@pytest.mark.parametrize(
    "pair", [("KE\x01YS", "v"), ("KEYS", "a\x02b"), ("TAGS", "x\x01"), ("__CRC32#", "1")]
)
def test_separator_bytes_and_the_reserved_key_are_refused(pair: tuple[str, str]) -> None:
    with pytest.raises(PropertiesTooLargeError):
        validate_properties([pair])
    with pytest.raises(PropertiesTooLargeError):
        validate_message("orders", 0, 1, 0, 10, LIMITS, properties=[pair])
    validate_properties([("KEYS", "a b"), ("TAGS", "")])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_body_bytes": 0},
        {"max_topic_chars": 256},
        {"max_properties_bytes": 65535},
        {"max_properties_bytes": -1},
    ],
)
def test_limits_refuse_values_the_format_cannot_hold(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        Limits(**kwargs)
