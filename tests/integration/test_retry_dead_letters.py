"""Issue 18's retry and dead letters through the typed client against a real 3-node cluster: a
message sent back with ``Consumer.reconsume_later`` comes back to the group from its retry
topic (its first topic visible, ``reconsume_times`` counting), after ``max_reconsume_times``
retries it lands in ``%DLQ%<group>``, and ``raftlog dlq`` lists, shows and resends it.

The nodes run short delay levels so each retry (level 3 + retries) takes a fraction of a
second, and the leader is killed while messages are on their way back: every message is
still delivered on every retry and dead-lettered exactly once."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterator

import pytest

from raftlog.cli import main as cli_main
from raftlog.client import (
    Admin,
    Connection,
    Consumer,
    ConsumeResult,
    Message,
    NotFoundError,
    Producer,
    PushConsumer,
    RaftlogError,
)
from raftlog.testing.local_cluster import LocalCluster
from tests.support.topics import create_everywhere

pytestmark = pytest.mark.integration

LEVELS = "100ms 200ms 300ms 400ms 500ms"
MAX_RECONSUME_TIMES = 2
WAIT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("retry")
    running = LocalCluster(
        str(base / "data"),
        base_port=0,
        durability="write",
        extra_args=("--message-delay-level", LEVELS),
    )
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def read_dead_letters(addresses: list[str], group: str, count: int) -> list[Message]:
    found: list[Message] = []
    deadline = time.monotonic() + WAIT_S
    with Consumer(
        addresses, f"{group}-audit", f"%DLQ%{group}", from_beginning=True, subscribe_retry=False
    ) as dlq:
        while len(found) < count and time.monotonic() < deadline:
            try:
                found += dlq.poll(0.2)
            except NotFoundError:
                time.sleep(0.1)  # the dead-letter topic is created with the first one
    return found


def consume_sending_back(
    consumer: Consumer, deliveries: dict[bytes, list[Message]], until: int, kill: object = None
) -> None:
    """Send back every message polled (committing after each batch) until ``until``
    deliveries were seen; ``kill()`` runs once, after the first round of send-backs."""
    deadline = time.monotonic() + WAIT_S
    while sum(len(d) for d in deliveries.values()) < until and time.monotonic() < deadline:
        for message in consumer.poll(0.2):
            deliveries[message.body].append(message)
            consumer.reconsume_later(message)
        consumer.commit()
        if kill is not None and all(len(d) >= 1 for d in deliveries.values()):
            kill()  # type: ignore[operator]
            kill = None


def test_retries_then_dead_letters_across_a_leader_kill(cluster: LocalCluster) -> None:
    topic, group, count = "retry-orders", "billing", 10
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, topic, 2)
        for i in range(count):
            producer.send(topic, f"order-{i}".encode(), tags="paid", properties={"app": "x"})
        with Admin(connection) as admin:
            leader_id = admin.cluster_status().leader_id
    deliveries: dict[bytes, list[Message]] = defaultdict(list)
    expected = count * (MAX_RECONSUME_TIMES + 1)
    survivors = [n.address for n in cluster.nodes.values() if n.node_id != leader_id]
    try:
        with Consumer(
            cluster.addresses, group, topic, max_reconsume_times=MAX_RECONSUME_TIMES
        ) as consumer:
            consume_sending_back(consumer, deliveries, expected, lambda: cluster.kill(leader_id))
        dead = read_dead_letters(survivors, group, count)
    finally:
        cluster.restart(leader_id)
    assert len(deliveries) == count
    for body, seen in deliveries.items():
        # The first delivery, then each retry: the first topic shown, the count going up.
        assert [m.reconsume_times for m in seen] == [0, 1, 2], body
        assert {m.topic for m in seen} == {topic}
        assert [m.pulled_topic for m in seen] == ["", "%RETRY%billing", "%RETRY%billing"]
        assert all(m.tags == "paid" and ("app", "x") in m.properties for m in seen)
    assert Counter(m.body for m in dead) == Counter({body: 1 for body in deliveries})
    for message in dead:
        props = dict(message.properties)
        assert message.reconsume_times == MAX_RECONSUME_TIMES + 1
        assert props["RETRY_TOPIC"] == topic and props["ORIGIN_MESSAGE_ID"]
        assert message.tags == "paid"


def test_a_new_member_of_the_group_gets_the_retries(cluster: LocalCluster) -> None:
    """The retry topic is the group's: a message sent back by one consumer that then stops
    comes back to the next one, and the first one's commit is not lost."""
    topic, group = "retry-handover", "handover"
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, topic, 1)
        producer.send(topic, b"once")
    with Consumer(cluster.addresses, group, topic) as first:
        deadline = time.monotonic() + WAIT_S
        polled: list[Message] = []
        while not polled and time.monotonic() < deadline:
            polled = first.poll(0.5)
        result = first.reconsume_later(polled[0])
        assert (result.topic, result.dead_lettered, result.reconsume_times) == (
            "%RETRY%handover",
            False,
            1,
        )
        first.commit()
    with Consumer(cluster.addresses, group, topic) as second:
        deadline = time.monotonic() + WAIT_S
        again: list[Message] = []
        while not again and time.monotonic() < deadline:
            again = second.poll(0.5)
        assert [(m.body, m.topic, m.reconsume_times) for m in again] == [(b"once", topic, 1)]


def test_send_back_checks(cluster: LocalCluster) -> None:
    topic, group = "retry-checks", "checks"
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, topic, 1)
        producer.send(topic, b"x")
        with pytest.raises(RaftlogError, match="written only by the node"):
            producer.send("%RETRY%checks", b"x")
    with Consumer(cluster.addresses, group, topic, from_beginning=True) as consumer:
        deadline = time.monotonic() + WAIT_S
        polled: list[Message] = []
        while not polled and time.monotonic() < deadline:
            polled = consumer.poll(0.5)
        forged = Message(
            topic="other-topic",
            queue_id=0,
            queue_offset=0,
            physical_offset=0,
            msg_id=polled[0].msg_id,
            body=b"",
        )
        with pytest.raises(RaftlogError, match="names a message of topic 'retry-checks'"):
            consumer.reconsume_later(forged)
    with pytest.raises(ValueError, match="max_reconsume_times"):
        Consumer(cluster.addresses, group, topic, max_reconsume_times=0)


def test_dlq_cli_lists_shows_and_resends(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = "retry-cli", "cli"
    with Connection(cluster.addresses) as connection, Producer(connection) as producer:
        create_everywhere(connection, topic, 1)
        producer.send(topic, b"poison", properties={"app": "x"})
    deliveries: dict[bytes, list[Message]] = defaultdict(list)
    with Consumer(cluster.addresses, group, topic, max_reconsume_times=1) as consumer:
        consume_sending_back(consumer, deliveries, 2)
    assert len(read_dead_letters(cluster.addresses, group, 1)) == 1
    servers = ["--servers", ",".join(cluster.addresses)]
    capsys.readouterr()
    assert cli_main(["dlq", "list", group, *servers, "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["offset"], listed["original_topic"], listed["reconsume_times"]) == (0, topic, 2)
    assert cli_main(["dlq", "show", group, "--offset", "0", *servers]) == 0
    shown = capsys.readouterr().out
    assert "poison" in shown and "RETRY_TOPIC" in shown
    # Every new dead letter, then nothing new; one by its offset.
    assert cli_main(["dlq", "resend", group, *servers]) == 0
    assert "resent 1 dead letter" in capsys.readouterr().out
    assert cli_main(["dlq", "resend", group, *servers]) == 0
    assert "resent 0 dead letter" in capsys.readouterr().out
    assert cli_main(["dlq", "resend", group, "--offset", "0", *servers]) == 0
    assert "resent 1 dead letter" in capsys.readouterr().out
    assert cli_main(["dlq", "show", group, "--offset", "7", *servers]) == 1
    assert cli_main(["dlq", "list", "no-such-group", *servers]) == 1
    assert cli_main(["dlq", "show", group, "--offset", "-1", *servers]) == 2
    # The resent copies are back in their topic as first deliveries.
    with Consumer(cluster.addresses, f"{group}-check", topic, from_beginning=True) as check:
        deadline = time.monotonic() + WAIT_S
        seen: list[Message] = []
        while len(seen) < 3 and time.monotonic() < deadline:
            seen += check.poll(0.2)
    assert len(seen) == 3
    for resent in seen[1:]:
        assert (resent.body, resent.reconsume_times) == (b"poison", 0)
        assert ("app", "x") in resent.properties
        assert "RETRY_TOPIC" not in dict(resent.properties)


def test_a_push_consumer_tracks_and_commits_retried_messages_apart(
    cluster: LocalCluster,
) -> None:
    """Retried messages come from queue 0 of the retry topic: they must neither finish nor
    hold back the topic's own queue 0, and their progress is committed, so a push consumer
    started again later in the group does not see them a second time."""
    topic, group = "push-retry", "push-retry-group"
    with Connection(cluster.addresses) as connection:
        create_everywhere(connection, topic, 1)
        with Producer(connection) as producer:
            for index in range(20):
                producer.send(topic, b"m%d" % index)
    seen: Counter[bytes] = Counter()

    def listener(message: Message) -> ConsumeResult:
        seen[message.body] += 1
        first_try = message.reconsume_times == 0
        if first_try and message.body in (b"m3", b"m7"):
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.CONSUME_SUCCESS

    with PushConsumer(
        cluster.addresses,
        group=group,
        topic=topic,
        listener=listener,
        from_beginning=True,
        commit_interval_s=0.2,
    ):
        deadline = time.monotonic() + WAIT_S
        while (seen[b"m3"], seen[b"m7"]) != (2, 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # a commit interval or two
    assert (seen[b"m3"], seen[b"m7"]) == (2, 2)
    assert all(seen[b"m%d" % i] == 1 for i in range(20) if i not in (3, 7))
    again: list[bytes] = []

    def record(message: Message) -> ConsumeResult:
        again.append(message.body)
        return ConsumeResult.CONSUME_SUCCESS

    with PushConsumer(cluster.addresses, group=group, topic=topic, listener=record):
        time.sleep(2.0)
    assert again == []
