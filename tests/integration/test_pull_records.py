"""The fast Pull form (``return_records``) on a running three-node cluster (real gRPC servers
on 127.0.0.1, real files): on every member, each answer has the same status, offsets and
messages (message ids, hosts and all) as the original form, with the tag filter, max messages
and max bytes, past the end, and under long polling on a follower; the typed Consumer, which
uses it, reads back exactly what was produced.

One cluster serves the whole module; every call has a deadline."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from raftlog.client.consumer import Consumer
from raftlog.client.errors import InternalError
from raftlog.client.messages import Message
from raftlog.client.pulled_records import messages_from_records
from raftlog.proto import client_pb2
from tests.integration.test_cluster_api import wait_applied_everywhere
from tests.support.inprocess_cluster import InProcessCluster, running_cluster

PullStatus = client_pb2.PullStatus
TOPIC = "fast-pull"
QUEUE_COUNT = 3
QUEUE_ID = 1
COUNT = 40
BATCH = 12
CALL_TIMEOUT_S = 5.0


@dataclass
class Seeded:
    cluster: InProcessCluster
    leader: str
    follower: str
    results: list[client_pb2.ProduceResult]  # QUEUE_ID's messages, in order


def produce(
    cluster: InProcessCluster, leader: str, first: int, count: int
) -> list[client_pb2.ProduceResult]:
    """Messages ``first`` .. ``first + count - 1`` over every queue in turn (so a queue's
    records lie between the others'), in batches a small segment holds."""
    results: list[client_pb2.ProduceResult] = []
    for start in range(first, first + count, BATCH):
        response = cluster.producer(leader).Produce(
            client_pb2.ProduceRequest(
                topic=TOPIC,
                messages=[
                    client_pb2.ProduceMessage(
                        queue_id=i % QUEUE_COUNT,
                        body=b"m-%d-" % i + b"z" * (i * 7 % 300),
                        keys=[f"key-{i}", "shared"],
                        tags=("red", "blue", "green")[i // QUEUE_COUNT % 3],
                        uniq_key=f"uniq-{i}",
                        properties=[client_pb2.Property(name="n", value=str(i))],
                        flag=i,
                    )
                    for i in range(start, min(start + BATCH, first + count))
                ],
            ),
            timeout=CALL_TIMEOUT_S,
        )
        results += response.results
    wait_applied_everywhere(cluster, response.raft_index)
    return results


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    root: Path = tmp_path_factory.mktemp("pull_records")
    # Small segments, so the queue's records span several.
    with running_cluster(root, segment_size_bytes=8 << 10, max_body_bytes=1024) as cluster:
        cluster.create_topic(TOPIC, QUEUE_COUNT)
        leader = cluster.leader()
        follower = next(n for n in cluster.nodes if n != leader)
        results = produce(cluster, leader, 0, QUEUE_COUNT * COUNT)
        yield Seeded(cluster, leader, follower, results[QUEUE_ID::QUEUE_COUNT])


def both_forms(
    seeded: Seeded, node_id: str, **fields: object
) -> tuple[client_pb2.PullResponse, client_pb2.PullResponse]:
    """(original, fast) answers to the same Pull, and checks they agree."""
    consumer = seeded.cluster.consumer(node_id)
    request = {"topic": TOPIC, "queue_id": QUEUE_ID, **fields}
    slow = consumer.Pull(client_pb2.PullRequest(**request), timeout=CALL_TIMEOUT_S)  # type: ignore[arg-type]
    fast = consumer.Pull(
        client_pb2.PullRequest(**request, return_records=True),  # type: ignore[arg-type]
        timeout=CALL_TIMEOUT_S,
    )
    assert not fast.messages
    assert (fast.status, fast.next_queue_offset, fast.min_queue_offset, fast.max_queue_offset) == (
        slow.status,
        slow.next_queue_offset,
        slow.min_queue_offset,
        slow.max_queue_offset,
    )
    decoded = messages_from_records(fast.records)
    assert fast.record_count == len(decoded)
    assert decoded == [Message.from_proto(m) for m in slow.messages]
    return slow, fast


def test_every_member_answers_the_fast_form_as_the_original(seeded: Seeded) -> None:
    leader_port = int(seeded.cluster.addresses[seeded.leader].rsplit(":", 1)[1])
    for node_id in seeded.cluster.nodes:
        _, fast = both_forms(seeded, node_id, queue_offset=0, max_messages=1000)
        assert fast.status == PullStatus.PULL_STATUS_FOUND
        assert fast.record_count == COUNT
        decoded = messages_from_records(fast.records)
        assert [m.msg_id for m in decoded] == [r.msg_id for r in seeded.results]
        assert [m.queue_offset for m in decoded] == list(range(COUNT))
        assert {m.store_host for m in decoded} == {f"127.0.0.1:{leader_port}"}
        assert decoded[3].keys == ("key-10", "shared") and decoded[3].uniq_key == "uniq-10"
        assert decoded[3].properties == (("n", "10"),) and decoded[3].flag == 10


@pytest.mark.parametrize(
    "tags", [["blue"], ["red", "green"], ["blue", "*"], ["no-such-tag"]], ids=str
)
def test_the_tag_filter_picks_the_same_messages(seeded: Seeded, tags: list[str]) -> None:
    for node_id in (seeded.leader, seeded.follower):
        _, fast = both_forms(seeded, node_id, queue_offset=2, tags=tags)
        if tags == ["no-such-tag"]:
            assert fast.status == PullStatus.PULL_STATUS_NO_MATCHED_MESSAGES
            assert fast.record_count == 0 and not fast.records
            assert fast.next_queue_offset == COUNT
        else:
            assert fast.status == PullStatus.PULL_STATUS_FOUND
            wanted = set(tags) if "*" not in tags else None
            assert all(
                wanted is None or m.tags in wanted for m in messages_from_records(fast.records)
            )


def test_max_messages_and_max_bytes_bound_the_answer(seeded: Seeded) -> None:
    for node_id in (seeded.leader, seeded.follower):
        _, fast = both_forms(seeded, node_id, queue_offset=5, max_messages=7)
        assert (fast.record_count, fast.next_queue_offset) == (7, 12)
        first_two = messages_from_records(fast.records)[:2]
        size_bytes = sum(m.store_size_bytes for m in first_two)
        _, fast = both_forms(seeded, node_id, queue_offset=5, max_bytes=size_bytes)
        assert (fast.record_count, fast.next_queue_offset) == (2, 7)
        assert len(fast.records) == size_bytes
        # At least one message, however small max_bytes is.
        _, fast = both_forms(seeded, node_id, queue_offset=5, max_bytes=1)
        assert (fast.record_count, fast.next_queue_offset) == (1, 6)


def test_a_pull_at_or_past_the_end_returns_no_records(seeded: Seeded) -> None:
    for node_id in (seeded.leader, seeded.follower):
        _, at_end = both_forms(seeded, node_id, queue_offset=COUNT)
        assert at_end.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
        assert at_end.record_count == 0 and not at_end.records
        _, past = both_forms(seeded, node_id, queue_offset=COUNT + 3, long_poll_timeout_ms=3000)
        assert past.status == PullStatus.PULL_STATUS_OFFSET_TOO_LARGE
        assert past.next_queue_offset == COUNT and not past.records


def test_a_fast_long_poll_on_a_follower_wakes_on_a_produce(seeded: Seeded) -> None:
    described = seeded.cluster.admin(seeded.follower).DescribeTopic(
        client_pb2.DescribeTopicRequest(topic=TOPIC), timeout=CALL_TIMEOUT_S
    )
    end = described.queues[QUEUE_ID].max_queue_offset
    with ThreadPoolExecutor(max_workers=1) as pool:
        poll = pool.submit(
            seeded.cluster.consumer(seeded.follower).Pull,
            client_pb2.PullRequest(
                topic=TOPIC,
                queue_id=QUEUE_ID,
                queue_offset=end,
                long_poll_timeout_ms=5000,
                return_records=True,
            ),
            timeout=10,
        )
        time.sleep(0.3)
        assert not poll.done(), "the long poll answered before anything was produced"
        produced_at = time.monotonic()
        results = produce(seeded.cluster, seeded.leader, 1000, QUEUE_COUNT)
        response = poll.result(timeout=10)
        answered_at = time.monotonic()
    assert response.status == PullStatus.PULL_STATUS_FOUND
    (message,) = messages_from_records(response.records)
    (wanted,) = [r for r in results if r.queue_id == QUEUE_ID]
    assert message.msg_id == wanted.msg_id
    assert message.queue_offset == end
    assert answered_at - produced_at < 3.0, "the poll was not woken by the new message"


def test_the_consumer_reads_back_what_was_produced(seeded: Seeded) -> None:
    addresses = [seeded.cluster.addresses[seeded.follower]]
    with Consumer(
        addresses, group="g", topic=TOPIC, queue_ids=[QUEUE_ID], from_beginning=True
    ) as consumer:
        read: list[Message] = []
        for _ in range(20):
            batch = consumer.poll(timeout_s=0.5)
            if not batch:
                break
            read += batch
    assert [m.msg_id for m in read[:COUNT]] == [r.msg_id for r in seeded.results]
    with Consumer(
        addresses, group="g", topic=TOPIC, queue_ids=[QUEUE_ID], tags=["blue"], from_beginning=True
    ) as filtered:
        blue = filtered.poll(timeout_s=0.5)
    assert blue and all(m.tags == "blue" for m in blue)


def test_a_seek_after_a_prefetch_reads_from_the_new_position(seeded: Seeded) -> None:
    addresses = [seeded.cluster.addresses[seeded.leader]]
    with Consumer(
        addresses,
        group="g",
        topic=TOPIC,
        queue_ids=[QUEUE_ID],
        from_beginning=True,
        max_messages=5,
    ) as consumer:
        first = consumer.poll(timeout_s=0.5)  # more is there: the next 5 are prefetched
        assert [m.queue_offset for m in first] == [0, 1, 2, 3, 4]
        consumer.seek(QUEUE_ID, 20)
        after_seek = consumer.poll(timeout_s=0.5)
        assert [m.queue_offset for m in after_seek] == [20, 21, 22, 23, 24]
        following = consumer.poll(timeout_s=0.5)  # the prefetch made after the seek
        assert [m.queue_offset for m in following] == [25, 26, 27, 28, 29]
        assert [m.msg_id for m in following] == [r.msg_id for r in seeded.results[25:30]]


def test_a_record_damaged_on_disk_is_never_handed_over(tmp_path: Path) -> None:
    segment_size_bytes = 64 << 10
    with running_cluster(
        tmp_path, segment_size_bytes=segment_size_bytes, max_body_bytes=1024
    ) as cluster:
        cluster.create_topic(TOPIC, 1)
        leader = cluster.leader()
        follower = next(n for n in cluster.nodes if n != leader)
        response = cluster.producer(leader).Produce(
            client_pb2.ProduceRequest(
                topic=TOPIC,
                messages=[
                    client_pb2.ProduceMessage(queue_id=0, body=b"intact-%d" % i) for i in range(5)
                ],
            ),
            timeout=CALL_TIMEOUT_S,
        )
        wait_applied_everywhere(cluster, response.raft_index)
        # Flip one body byte of the third message in the follower's CommitLog file.
        victim = response.results[2].physical_offset
        start = victim - victim % segment_size_bytes
        path = tmp_path / follower / "store" / "commitlog" / f"{start:020d}"
        data = bytearray(path.read_bytes())
        position = victim - start + data[victim - start :].index(b"intact-2")
        data[position] ^= 0x01
        path.write_bytes(bytes(data))

        fast = cluster.consumer(follower).Pull(
            client_pb2.PullRequest(topic=TOPIC, queue_id=0, queue_offset=0, return_records=True),
            timeout=CALL_TIMEOUT_S,
        )
        assert fast.record_count == 5  # the member forwards the bytes; the client checks them
        with pytest.raises(InternalError, match=r"record 2: .*body CRC"):
            messages_from_records(fast.records)
        # queue_ids: no group heartbeat, whose redirect would send the pulls to the leader.
        with Consumer(
            [cluster.addresses[follower]], "g", TOPIC, queue_ids=[0], from_beginning=True
        ) as consumer:
            with pytest.raises(InternalError, match="corrupt"):
                consumer.poll(timeout_s=0.5)
            assert consumer.positions == {0: 0}  # nothing was consumed
