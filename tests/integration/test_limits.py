"""Issue 16's request limits through the typed client against a real 3-node cluster whose
limits are set in NodeConfig: each refusal is the client's typed error, names the setting,
and leaves nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.client import Admin, Consumer, Producer
from raftlog.client.errors import InvalidArgumentError, ResourceExhaustedError
from tests.support.inprocess_cluster import InProcessCluster, running_cluster

LIMITS = {
    "max_body_bytes": 4096,
    "max_properties_bytes": 256,
    "max_topic_queue_count": 8,
    "max_topic_count": 2,
    "max_produce_request_bytes": 16384,
    "max_produce_message_count": 4,
    "max_pull_message_count": 2,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessCluster]:
    root: Path = tmp_path_factory.mktemp("limits")
    with running_cluster(root, tick_ms=20, **LIMITS) as started:
        started.create_topic("t", 2)
        yield started


@pytest.fixture
def addresses(cluster: InProcessCluster) -> list[str]:
    return list(cluster.addresses.values())


def test_topic_limits(addresses: list[str]) -> None:
    with Admin(addresses, timeout_s=10) as admin:
        with pytest.raises(InvalidArgumentError, match="max_topic_queue_count"):
            admin.create_topic("wide", 9)
        admin.create_topic("second", 1)
        with pytest.raises(ResourceExhaustedError, match="max_topic_count"):
            admin.create_topic("third", 1)
        # Creating an existing topic again is not a new topic.
        assert not admin.create_topic("second", 1).created


@pytest.mark.parametrize(
    ("body_bytes", "properties", "setting"),
    [
        (4097, {}, "max_body_bytes"),
        (10, {"k": "v" * 300}, "max_properties_bytes"),
    ],
)
def test_message_limits(
    addresses: list[str], body_bytes: int, properties: dict[str, str], setting: str
) -> None:
    with Producer(addresses, timeout_s=10) as producer:
        with pytest.raises(InvalidArgumentError, match=setting):
            producer.send("t", b"x" * body_bytes, queue_id=0, properties=properties)
        producer.send("t", b"fits", queue_id=1)


def test_batch_limits_and_pull_cap(addresses: list[str]) -> None:
    from raftlog.client.messages import OutgoingMessage

    with Producer(addresses, timeout_s=10) as producer:
        with pytest.raises(InvalidArgumentError, match="max_produce_message_count"):
            producer.send_batch("t", [OutgoingMessage(b"m", queue_id=0)] * 5)
        with pytest.raises(InvalidArgumentError, match="max_produce_request_bytes"):
            producer.send_batch("t", [OutgoingMessage(b"m" * 4096, queue_id=0)] * 4)
        producer.send_batch("t", [OutgoingMessage(b"m", queue_id=0)] * 3)
    # The Pull asks for 100 messages per call; the node caps each answer at 2.
    with Consumer(addresses, "g", "t", [0], from_beginning=True, max_messages=100) as consumer:
        assert len(consumer.poll(timeout_s=5)) == 2
