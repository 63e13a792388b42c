"""The client API of a running three-node cluster (real gRPC servers on 127.0.0.1, real files),
driven only through gRPC: every bad input of errors.proto gets its exact status code and a
message that says what was wrong, writes sent to a follower are redirected to the leader, and
after a refused request nothing was written (the leader's Raft log and the queues' offsets are
unchanged) and the node still takes a good produce. Then the happy paths through the cluster:
produce/pull/query round trips on followers, long polling on a follower, consumer-group
offsets, and the pre-encoded ``records`` produce path.

One cluster serves the whole module (topics are created once); every call has a deadline, so
a node that hangs fails the test instead of stalling it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from raftlog.node.messaging.delay import SCHEDULE_QUEUE_COUNT
from raftlog.node.messaging.transaction import HALF_TOPIC, OP_TOPIC, TRANSACTION_QUEUE_COUNT
from raftlog.proto import client_pb2, client_pb2_grpc, errors_pb2
from raftlog.store.hashing import SCHEDULE_TOPIC
from raftlog.store.record import MessageRecord, encode_record
from tests.support.inprocess_cluster import InProcessCluster, running_cluster

Code = grpc.StatusCode
PullStatus = client_pb2.PullStatus

TOPIC = "api"
QUEUE_COUNT = 4
FAST_TOPIC = "fast"  # written only through the pre-encoded ``records`` path
GROW_TOPIC = "grow"  # for CreateTopic's "queues never shrink"
UNKNOWN_TOPIC = "no_such_topic"
MAX_BODY_BYTES = 64 * 1024
MAX_PROPERTIES_BYTES = 32767
SEGMENT_SIZE_BYTES = 4 << 20
# A record with IPv4 hosts: the fixed fields before the body (docs/store-format.md).
RECORD_HEADER_BYTES_IPV4 = 88
CALL_TIMEOUT_S = 5.0
# ClusterStatus answers from a view the Raft loop refreshes every 50 ms: wait longer than that
# before comparing it, so a write that slipped through would show.
VIEW_REFRESH_WAIT_S = 0.15


@dataclass
class Api:
    cluster: InProcessCluster
    leader: str
    follower: str
    # Ids of messages the fixture produced to TOPIC queue 0.
    seeded: list[client_pb2.ProduceResult]
    # The highest Raft index a write of this module was answered with.
    last_write_index: int = 0

    @property
    def leader_address(self) -> str:
        return self.cluster.addresses[self.leader]

    def produce(
        self, request: client_pb2.ProduceRequest, node_id: str | None = None
    ) -> client_pb2.ProduceResponse:
        response: client_pb2.ProduceResponse = self.cluster.producer(
            node_id or self.leader
        ).Produce(request, timeout=CALL_TIMEOUT_S)
        self.last_write_index = max(self.last_write_index, response.raft_index)
        return response

    def consumer(self, node_id: str | None = None) -> client_pb2_grpc.ConsumerStub:
        return self.cluster.consumer(node_id or self.leader)

    def admin(self, node_id: str | None = None) -> client_pb2_grpc.AdminStub:
        return self.cluster.admin(node_id or self.leader)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    root: Path = tmp_path_factory.mktemp("cluster_api")
    with running_cluster(
        root, segment_size_bytes=SEGMENT_SIZE_BYTES, max_body_bytes=MAX_BODY_BYTES
    ) as cluster:
        cluster.create_topic(TOPIC, QUEUE_COUNT)
        cluster.create_topic(FAST_TOPIC, 2)
        cluster.create_topic(GROW_TOPIC, 4)
        leader = cluster.leader()
        follower = next(n for n in cluster.nodes if n != leader)
        seeded = cluster.producer(leader).Produce(
            client_pb2.ProduceRequest(
                topic=TOPIC,
                messages=[
                    client_pb2.ProduceMessage(queue_id=0, body=b"seed-%d" % i) for i in range(3)
                ],
            ),
            timeout=CALL_TIMEOUT_S,
        )
        wait_applied_everywhere(cluster, seeded.raft_index)
        yield Api(cluster, leader, follower, list(seeded.results), seeded.raft_index)


# ---------------------------------------------------------------------- helpers


def wait_applied_everywhere(cluster: InProcessCluster, index: int, timeout_s: float = 5.0) -> None:
    """Every member applied ``index`` (asked through ClusterStatus)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        applied = [
            cluster.admin(n)
            .ClusterStatus(client_pb2.ClusterStatusRequest(), timeout=CALL_TIMEOUT_S)
            .applied_index
            for n in cluster.nodes
        ]
        if min(applied) >= index:
            return
        time.sleep(0.02)
    raise TimeoutError(f"not every member applied index {index} within {timeout_s} s")


@dataclass(frozen=True)
class WrittenState:
    last_index: int
    commit_index: int
    max_queue_offsets: dict[str, tuple[int, ...]]


def written_state(api: Api) -> WrittenState:
    """The leader's last log index and every user topic's max queue offsets, once its log is
    settled (last == commit == applied) and its view shows the module's last answered write."""
    admin = api.admin()
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while True:
        status = admin.ClusterStatus(client_pb2.ClusterStatusRequest(), timeout=CALL_TIMEOUT_S)
        if (
            status.last_index == status.commit_index == status.applied_index
            and status.applied_index >= api.last_write_index
        ):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the leader's log did not settle: {status}")
        time.sleep(0.02)
    assert status.role == client_pb2.MEMBER_ROLE_LEADER, "leadership moved during the test"
    offsets = {}
    for topic in (TOPIC, FAST_TOPIC, GROW_TOPIC):
        described = admin.DescribeTopic(
            client_pb2.DescribeTopicRequest(topic=topic), timeout=CALL_TIMEOUT_S
        )
        offsets[topic] = tuple(q.max_queue_offset for q in described.queues)
    return WrittenState(status.last_index, status.commit_index, offsets)


def refused(call: Callable[[], object], code: grpc.StatusCode, *mentions: str) -> grpc.RpcError:
    """``call`` fails with exactly ``code`` and a message naming each of ``mentions``."""
    with pytest.raises(grpc.RpcError) as raised:
        call()
    error = raised.value
    assert error.code() is code, f"expected {code}, got {error.code()}: {error.details()}"
    details = error.details() or ""
    assert details.strip(), f"{code} came without a message"
    for mention in mentions:
        assert mention in details, f"message {details!r} does not mention {mention!r}"
    return error


def good_produce(api: Api, body: bytes = b"still-serving") -> client_pb2.ProduceResponse:
    response = api.produce(
        client_pb2.ProduceRequest(
            topic=TOPIC, messages=[client_pb2.ProduceMessage(queue_id=0, body=body)]
        )
    )
    assert len(response.results) == 1 and response.raft_index > 0
    return response


def message(**fields: object) -> client_pb2.ProduceMessage:
    fields.setdefault("queue_id", 0)
    fields.setdefault("body", b"x")
    return client_pb2.ProduceMessage(**fields)  # type: ignore[arg-type]


def produce_request(*messages: client_pb2.ProduceMessage, topic: str = TOPIC) -> object:
    return client_pb2.ProduceRequest(topic=topic, messages=list(messages or [message()]))


def record_bytes(
    topic: str,
    queue_id: int,
    body: bytes,
    *,
    properties: tuple[tuple[str, str], ...] = (),
    born_timestamp_ms: int = 1_764_000_000_000,
    record_crc: bool = True,
) -> bytes:
    """One record as a producer encodes it for ``ProduceRequest.records``: the broker's fields
    (queue and physical offsets, store time, store host) zero."""
    return encode_record(
        MessageRecord(
            topic=topic,
            queue_id=queue_id,
            flag=7,
            queue_offset=0,
            physical_offset=0,
            sys_flag=0,
            born_timestamp_ms=born_timestamp_ms,
            born_host=("10.1.2.3", 4321),
            store_timestamp_ms=0,
            store_host=("0.0.0.0", 0),
            reconsume_times=0,
            prepared_transaction_offset=0,
            body=body,
            properties=properties,
        ),
        record_crc=record_crc,
    )


def message_id_at(api: Api, physical_offset: int) -> str:
    """A well-formed offset message id of the leader's store host at ``physical_offset``."""
    return api.seeded[0].msg_id[:16] + f"{physical_offset:016X}"


# ---------------------------------------------------------------------- bad inputs

Case = Callable[[Api], object]


def _produce(*messages: client_pb2.ProduceMessage, topic: str = TOPIC) -> Case:
    return lambda api: api.produce(produce_request(*messages, topic=topic))  # type: ignore[arg-type]


def _produce_records(records: bytes, topic: str = TOPIC) -> Case:
    return lambda api: api.produce(client_pb2.ProduceRequest(topic=topic, records=records))


def _pull(**fields: object) -> Case:
    request = client_pb2.PullRequest(**{"topic": TOPIC, **fields})  # type: ignore[arg-type]
    return lambda api: api.consumer().Pull(request, timeout=CALL_TIMEOUT_S)


def _query_by_key(**fields: object) -> Case:
    request = client_pb2.QueryByKeyRequest(**{"topic": TOPIC, "key": "k", **fields})  # type: ignore[arg-type]
    return lambda api: api.consumer().QueryByKey(request, timeout=CALL_TIMEOUT_S)


def _query_offset_by_time(**fields: object) -> Case:
    request = client_pb2.QueryOffsetByTimeRequest(**{"topic": TOPIC, **fields})  # type: ignore[arg-type]
    return lambda api: api.consumer().QueryOffsetByTime(request, timeout=CALL_TIMEOUT_S)


def _query_by_id(msg_id: str | Callable[[Api], str]) -> Case:
    def call(api: Api) -> object:
        wanted = msg_id(api) if callable(msg_id) else msg_id
        return api.consumer().QueryByMessageId(
            client_pb2.QueryByMessageIdRequest(msg_id=wanted), timeout=CALL_TIMEOUT_S
        )

    return call


def _commit(group: str = "g-bad", **offset: object) -> Case:
    entry = client_pb2.QueueOffset(**{"topic": TOPIC, "queue_id": 0, "queue_offset": 1, **offset})  # type: ignore[arg-type]
    request = client_pb2.CommitOffsetsRequest(group=group, offsets=[entry])
    return lambda api: api.consumer().CommitOffsets(request, timeout=CALL_TIMEOUT_S)


def _create_topic(topic: str, queue_count: int) -> Case:
    request = client_pb2.CreateTopicRequest(topic=topic, queue_count=queue_count)
    return lambda api: api.admin().CreateTopic(request, timeout=CALL_TIMEOUT_S)


def _describe(topic: str) -> Case:
    request = client_pb2.DescribeTopicRequest(topic=topic)
    return lambda api: api.admin().DescribeTopic(request, timeout=CALL_TIMEOUT_S)


def _transfer(target: str | Callable[[Api], str]) -> Case:
    def call(api: Api) -> object:
        target_id = target(api) if callable(target) else target
        return api.admin().TransferLeadership(
            client_pb2.TransferLeadershipRequest(target_id=target_id), timeout=CALL_TIMEOUT_S
        )

    return call


def _good_record() -> bytes:
    return record_bytes(TOPIC, 0, b"good")


def _bad_crc_record() -> bytes:
    damaged = bytearray(record_bytes(TOPIC, 1, b"damaged body"))
    damaged[RECORD_HEADER_BYTES_IPV4 + 3] ^= 0xFF  # inside the body: its CRC no longer matches
    return bytes(damaged)


LONG_TOPIC = "t" * 128
INVALID = Code.INVALID_ARGUMENT
NOT_FOUND = Code.NOT_FOUND

# (id, the call, its code, what its message must mention)
BAD_INPUTS: list[tuple[str, Case, grpc.StatusCode, tuple[str, ...]]] = [
    # Produce: topic names.
    ("produce-topic-chars", _produce(topic="bad topic!"), INVALID, ("bad topic!", "characters")),
    ("produce-topic-too-long", _produce(topic=LONG_TOPIC), INVALID, ("128", "127")),
    ("produce-topic-empty", _produce(topic=""), INVALID, ("empty",)),
    ("produce-topic-reserved", _produce(topic="__raftlog_mine"), INVALID, ("reserved",)),
    ("produce-unknown-topic", _produce(topic=UNKNOWN_TOPIC), NOT_FOUND, (UNKNOWN_TOPIC,)),
    (
        "produce-unknown-topic-round-robin",
        _produce(client_pb2.ProduceMessage(body=b"x"), topic=UNKNOWN_TOPIC),
        NOT_FOUND,
        (UNKNOWN_TOPIC,),
    ),
    # Produce: sizes and properties.
    (
        "produce-body-too-large",
        _produce(message(body=b"b" * (MAX_BODY_BYTES + 1))),
        INVALID,
        (str(MAX_BODY_BYTES + 1), str(MAX_BODY_BYTES)),
    ),
    (
        "produce-properties-too-large",
        _produce(
            message(properties=[client_pb2.Property(name="big", value="v" * MAX_PROPERTIES_BYTES)])
        ),
        INVALID,
        (str(MAX_PROPERTIES_BYTES),),
    ),
    *[
        (
            f"produce-reserved-property-{name}",
            _produce(message(properties=[client_pb2.Property(name=name, value="v")])),
            INVALID,
            (name,),
        )
        for name in ("KEYS", "TAGS", "UNIQ_KEY", "__CRC32#")
    ],
    (
        "produce-property-separator",
        _produce(message(properties=[client_pb2.Property(name="p", value="a\x01b")])),
        INVALID,
        ("separator",),
    ),
    ("produce-key-with-space", _produce(message(keys=["two words"])), INVALID, ("two words",)),
    ("produce-key-empty", _produce(message(keys=["ok", ""])), INVALID, ("empty",)),
    # Produce: queues and numbers.
    ("produce-queue-id-too-big", _produce(message(queue_id=QUEUE_COUNT)), NOT_FOUND, ("4",)),
    ("produce-queue-id-negative", _produce(message(queue_id=-1)), INVALID, ("queue_id", "-1")),
    (
        "produce-born-timestamp-negative",
        _produce(message(born_timestamp_ms=-5)),
        INVALID,
        ("born_timestamp_ms", "-5"),
    ),
    (
        "produce-batch-second-message-bad",
        _produce(message(body=b"fine"), message(body=b"b" * (MAX_BODY_BYTES + 1))),
        INVALID,
        (str(MAX_BODY_BYTES),),
    ),
    # Produce: messages vs records.
    (
        "produce-both-messages-and-records",
        lambda api: api.produce(
            client_pb2.ProduceRequest(topic=TOPIC, messages=[message()], records=_good_record())
        ),
        INVALID,
        ("both",),
    ),
    (
        "produce-empty-batch",
        lambda api: api.produce(client_pb2.ProduceRequest(topic=TOPIC)),
        INVALID,
        ("empty",),
    ),
    ("produce-records-random-bytes", _produce_records(os.urandom(200)), INVALID, ("record",)),
    ("produce-records-short-garbage", _produce_records(b"\x00\x01\x02"), INVALID, ("record",)),
    (
        "produce-records-truncated",
        _produce_records(_good_record() + _good_record()[:-1]),
        INVALID,
        ("record",),
    ),
    (
        "produce-records-bad-body-crc",
        _produce_records(_good_record() + _bad_crc_record()),
        INVALID,
        ("CRC",),
    ),
    (
        "produce-records-topic-mismatch",
        _produce_records(record_bytes(FAST_TOPIC, 0, b"elsewhere")),
        INVALID,
        (FAST_TOPIC,),
    ),
    (
        "produce-records-body-too-large",
        _produce_records(record_bytes(TOPIC, 0, b"b" * (MAX_BODY_BYTES + 1))),
        INVALID,
        (str(MAX_BODY_BYTES),),
    ),
    (
        "produce-records-unknown-topic",
        _produce_records(record_bytes(UNKNOWN_TOPIC, 0, b"x"), topic=UNKNOWN_TOPIC),
        NOT_FOUND,
        (UNKNOWN_TOPIC,),
    ),
    (
        "produce-records-queue-id-too-big",
        _produce_records(record_bytes(TOPIC, QUEUE_COUNT, b"x")),
        NOT_FOUND,
        ("4",),
    ),
    (
        "produce-records-queue-id-negative",
        _produce_records(_good_record() + record_bytes(TOPIC, -1, b"x")),
        INVALID,
        ("-1",),
    ),
    (
        "produce-records-born-timestamp-negative",
        _produce_records(record_bytes(TOPIC, 0, b"x", born_timestamp_ms=-5)),
        INVALID,
        ("-5",),
    ),
    # Pull.
    ("pull-topic-chars", _pull(topic="no/slash"), INVALID, ("no/slash",)),
    ("pull-topic-too-long", _pull(topic=LONG_TOPIC), INVALID, ("127",)),
    ("pull-topic-empty", _pull(topic=""), INVALID, ("empty",)),
    ("pull-unknown-topic", _pull(topic=UNKNOWN_TOPIC), NOT_FOUND, (UNKNOWN_TOPIC,)),
    ("pull-queue-id-too-big", _pull(queue_id=QUEUE_COUNT), NOT_FOUND, ("4",)),
    ("pull-queue-id-negative", _pull(queue_id=-1), INVALID, ("queue_id",)),
    ("pull-queue-offset-negative", _pull(queue_offset=-1), INVALID, ("queue_offset",)),
    # QueryByKey.
    ("query-key-unknown-topic", _query_by_key(topic=UNKNOWN_TOPIC), NOT_FOUND, (UNKNOWN_TOPIC,)),
    ("query-key-topic-chars", _query_by_key(topic="a b"), INVALID, ("characters",)),
    ("query-key-empty-key", _query_by_key(key=""), INVALID, ("key",)),
    (
        "query-key-negative-begin",
        _query_by_key(begin_timestamp_ms=-1),
        INVALID,
        ("begin_timestamp_ms",),
    ),
    ("query-key-negative-end", _query_by_key(end_timestamp_ms=-1), INVALID, ("end_timestamp_ms",)),
    # QueryOffsetByTime.
    (
        "query-time-unknown-topic",
        _query_offset_by_time(topic=UNKNOWN_TOPIC),
        NOT_FOUND,
        (UNKNOWN_TOPIC,),
    ),
    ("query-time-queue-id-too-big", _query_offset_by_time(queue_id=QUEUE_COUNT), NOT_FOUND, ()),
    ("query-time-queue-id-negative", _query_offset_by_time(queue_id=-2), INVALID, ("queue_id",)),
    (
        "query-time-negative-timestamp",
        _query_offset_by_time(timestamp_ms=-1),
        INVALID,
        ("timestamp_ms",),
    ),
    # QueryByMessageId.
    ("query-id-not-hex", _query_by_id("Z" * 32), INVALID, ("hex",)),
    ("query-id-too-short", _query_by_id("0" * 31), INVALID, ("32",)),
    ("query-id-too-long", _query_by_id("0" * 33), INVALID, ("32",)),
    ("query-id-empty", _query_by_id(""), INVALID, ("hex",)),
    (
        "query-id-past-the-end",
        _query_by_id(lambda api: message_id_at(api, 1 << 40)),
        NOT_FOUND,
        (str(1 << 40),),
    ),
    (
        "query-id-inside-a-record",
        _query_by_id(lambda api: message_id_at(api, api.seeded[0].physical_offset + 1)),
        NOT_FOUND,
        (),
    ),
    # CommitOffsets.
    ("commit-negative-offset", _commit(queue_offset=-1), INVALID, ("queue_offset",)),
    ("commit-queue-id-too-big", _commit(queue_id=QUEUE_COUNT), NOT_FOUND, ("4",)),
    ("commit-queue-id-negative", _commit(queue_id=-1), INVALID, ("queue_id",)),
    ("commit-unknown-topic", _commit(topic=UNKNOWN_TOPIC), NOT_FOUND, (UNKNOWN_TOPIC,)),
    ("commit-empty-group", _commit(group=""), INVALID, ("group",)),
    ("commit-group-chars", _commit(group="my group"), INVALID, ("my group",)),
    # Topics.
    ("create-topic-zero-queues", _create_topic("zero", 0), INVALID, ("queue_count", "0")),
    ("create-topic-negative-queues", _create_topic("neg", -1), INVALID, ("queue_count",)),
    (
        "create-topic-too-many-queues",
        _create_topic("huge", 1025),
        INVALID,
        ("1024", "max_topic_queue_count"),
    ),
    ("create-topic-shrink", _create_topic(GROW_TOPIC, 2), INVALID, (GROW_TOPIC, "4")),
    ("create-topic-chars", _create_topic("bad.name", 1), INVALID, ("bad.name",)),
    ("create-topic-too-long", _create_topic(LONG_TOPIC, 1), INVALID, ("127",)),
    ("create-topic-empty", _create_topic("", 1), INVALID, ("empty",)),
    ("create-topic-reserved", _create_topic("__raftlog_x", 1), INVALID, ("reserved",)),
    ("describe-unknown-topic", _describe(UNKNOWN_TOPIC), NOT_FOUND, (UNKNOWN_TOPIC,)),
    ("describe-topic-chars", _describe("a*b"), INVALID, ("a*b",)),
    # Leadership.
    ("transfer-unknown-member", _transfer("n9"), INVALID, ("n9",)),
    ("transfer-to-itself", _transfer(lambda api: api.leader), INVALID, ("this node",)),
]


@pytest.mark.parametrize(
    ("call", "code", "mentions"),
    [pytest.param(call, code, mentions, id=name) for name, call, code, mentions in BAD_INPUTS],
)
def test_a_bad_input_is_refused_with_its_code_and_nothing_is_written(
    api: Api, call: Case, code: grpc.StatusCode, mentions: tuple[str, ...]
) -> None:
    before = written_state(api)
    refused(lambda: call(api), code, *mentions)
    time.sleep(VIEW_REFRESH_WAIT_S)
    assert written_state(api) == before
    # The node neither crashed nor hangs: it still takes a good write.
    good_produce(api)


# ---------------------------------------------------------------------- not leader


REDIRECTED_WRITES: list[tuple[str, Case]] = [
    (
        "produce",
        lambda api: api.produce(produce_request(message(queue_id=1)), node_id=api.follower),  # type: ignore[arg-type]
    ),
    (
        "produce-server-picked-queue",
        lambda api: api.produce(
            produce_request(client_pb2.ProduceMessage(body=b"x")),  # type: ignore[arg-type]
            node_id=api.follower,
        ),
    ),
    (
        "produce-unknown-topic",
        lambda api: api.produce(
            produce_request(client_pb2.ProduceMessage(body=b"x"), topic=UNKNOWN_TOPIC),  # type: ignore[arg-type]
            node_id=api.follower,
        ),
    ),
    (
        "produce-records",
        lambda api: api.produce(
            client_pb2.ProduceRequest(topic=TOPIC, records=_good_record()), node_id=api.follower
        ),
    ),
    (
        "commit-offsets",
        lambda api: api.consumer(api.follower).CommitOffsets(
            client_pb2.CommitOffsetsRequest(
                group="g-redirect",
                offsets=[client_pb2.QueueOffset(topic=TOPIC, queue_id=0, queue_offset=1)],
            ),
            timeout=CALL_TIMEOUT_S,
        ),
    ),
    (
        "create-topic",
        lambda api: api.admin(api.follower).CreateTopic(
            client_pb2.CreateTopicRequest(topic="from_follower", queue_count=2),
            timeout=CALL_TIMEOUT_S,
        ),
    ),
    (
        "fetch-offsets",
        lambda api: api.consumer(api.follower).FetchOffsets(
            client_pb2.FetchOffsetsRequest(
                group="g-redirect", queues=[client_pb2.QueueRef(topic=TOPIC, queue_id=0)]
            ),
            timeout=CALL_TIMEOUT_S,
        ),
    ),
    (
        "fetch-offsets-every-queue",
        lambda api: api.consumer(api.follower).FetchOffsets(
            client_pb2.FetchOffsetsRequest(group="g-redirect"), timeout=CALL_TIMEOUT_S
        ),
    ),
    (
        "transfer-leadership",
        lambda api: api.admin(api.follower).TransferLeadership(
            client_pb2.TransferLeadershipRequest(target_id=api.follower),
            timeout=CALL_TIMEOUT_S,
        ),
    ),
]


@pytest.mark.parametrize("call", [pytest.param(call, id=name) for name, call in REDIRECTED_WRITES])
def test_a_follower_redirects_a_leader_only_call_to_the_leader(api: Api, call: Case) -> None:
    before = written_state(api)
    error = refused(
        lambda: call(api), Code.FAILED_PRECONDITION, "not leader", api.leader, api.leader_address
    )
    trailers = dict(error.trailing_metadata() or ())
    assert trailers["raftlog-leader"] == api.leader_address
    status = errors_pb2.RpcStatus.FromString(trailers["grpc-status-details-bin"])
    assert status.code == Code.FAILED_PRECONDITION.value[0]
    not_leader = errors_pb2.NotLeader()
    assert status.details[0].Unpack(not_leader)
    assert (not_leader.leader_id, not_leader.leader_address) == (api.leader, api.leader_address)
    assert not_leader.term > 0
    time.sleep(VIEW_REFRESH_WAIT_S)
    assert written_state(api) == before


# ---------------------------------------------------------------------- reads past the end


def test_a_pull_outside_the_queue_is_a_status_not_an_error(api: Api) -> None:
    response = good_produce(api, b"end-marker")
    wait_applied_everywhere(api.cluster, response.raft_index)
    end = response.results[0].queue_offset + 1
    for node_id in (api.leader, api.follower):
        consumer = api.consumer(node_id)
        at_end = consumer.Pull(
            client_pb2.PullRequest(topic=TOPIC, queue_id=0, queue_offset=end),
            timeout=CALL_TIMEOUT_S,
        )
        assert at_end.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
        assert (at_end.next_queue_offset, at_end.max_queue_offset) == (end, end)
        assert not at_end.messages
        started = time.monotonic()
        past_end = consumer.Pull(
            client_pb2.PullRequest(
                topic=TOPIC, queue_id=0, queue_offset=end + 5, long_poll_timeout_ms=5000
            ),
            timeout=CALL_TIMEOUT_S + 5,
        )
        # Past the end is answered at once, even with a long poll asked for.
        assert time.monotonic() - started < 1.0
        assert past_end.status == PullStatus.PULL_STATUS_OFFSET_TOO_LARGE
        assert (past_end.next_queue_offset, past_end.max_queue_offset) == (end, end)
        assert not past_end.messages
        assert past_end.min_queue_offset == 0


# ---------------------------------------------------------------------- round trips


def _produce_three_batches(api: Api, queue_id: int) -> tuple[list[Any], list[Any], int, list[int]]:
    """Three batches of four messages (keys, tags, uniq keys, a property, a flag), apart in
    store time; (the answers, every result, the first queue offset, each batch's store time)."""
    batches = []
    for batch in range(3):
        batches.append(
            api.produce(
                client_pb2.ProduceRequest(
                    topic=TOPIC,
                    messages=[
                        client_pb2.ProduceMessage(
                            queue_id=queue_id,
                            body=b"rt-%d-%d" % (batch, i),
                            keys=[f"rt-key-{batch}-{i}", "rt-shared"],
                            tags="blue" if i % 2 else "red",
                            uniq_key=f"uniq-{batch}-{i}",
                            properties=[client_pb2.Property(name="origin", value="test")],
                            flag=3,
                        )
                        for i in range(4)
                    ],
                )
            )
        )
        time.sleep(0.01)  # distinct store timestamps per batch
    results = [r for b in batches for r in b.results]
    first_offset = results[0].queue_offset
    assert [r.queue_offset for r in results] == list(range(first_offset, first_offset + 12))
    assert {r.queue_id for r in results} == {queue_id}
    assert len({r.msg_id for r in results}) == 12
    stamps = [b.store_timestamp_ms for b in batches]
    assert stamps == sorted(stamps) and stamps[0] < stamps[-1]
    return batches, results, first_offset, stamps


def _check_pulls_on(
    api: Api, node_id: str, queue_id: int, first_offset: int, results: list[Any]
) -> None:
    """Every field round-trips through a plain Pull and a tag-filtered one on ``node_id``."""
    consumer = api.consumer(node_id)
    pulled = consumer.Pull(
        client_pb2.PullRequest(
            topic=TOPIC, queue_id=queue_id, queue_offset=first_offset, max_messages=100
        ),
        timeout=CALL_TIMEOUT_S,
    )
    assert pulled.status == PullStatus.PULL_STATUS_FOUND
    assert [m.body for m in pulled.messages] == [
        b"rt-%d-%d" % (b, i) for b in range(3) for i in range(4)
    ]
    assert [m.msg_id for m in pulled.messages] == [r.msg_id for r in results]
    assert pulled.next_queue_offset == pulled.max_queue_offset == first_offset + 12
    sample = pulled.messages[5]
    assert (sample.tags, list(sample.keys), sample.uniq_key, sample.flag) == (
        "blue",
        ["rt-key-1-1", "rt-shared"],
        "uniq-1-1",
        3,
    )
    assert [(p.name, p.value) for p in sample.properties] == [("origin", "test")]
    assert sample.store_host.ip == "127.0.0.1"
    assert sample.store_host.port == int(api.leader_address.rsplit(":", 1)[1])

    # Tag filter: only "blue" (odd i), the scan moves past the rest.
    tagged = consumer.Pull(
        client_pb2.PullRequest(
            topic=TOPIC, queue_id=queue_id, queue_offset=first_offset, tags=["blue"]
        ),
        timeout=CALL_TIMEOUT_S,
    )
    assert tagged.status == PullStatus.PULL_STATUS_FOUND
    assert [m.body for m in tagged.messages] == [
        b"rt-%d-%d" % (b, i) for b in range(3) for i in (1, 3)
    ]
    assert tagged.next_queue_offset == first_offset + 12
    none_match = consumer.Pull(
        client_pb2.PullRequest(
            topic=TOPIC, queue_id=queue_id, queue_offset=first_offset, tags=["green"]
        ),
        timeout=CALL_TIMEOUT_S,
    )
    assert none_match.status == PullStatus.PULL_STATUS_NO_MATCHED_MESSAGES
    assert not none_match.messages
    assert none_match.next_queue_offset == first_offset + 12


def _check_queries_on_a_follower(
    api: Api, queue_id: int, first_offset: int, results: list[Any], stamps: list[int]
) -> None:
    """Topics, lookups by message id, key and time, answered by a follower."""
    listed = api.admin(api.follower).ListTopics(
        client_pb2.ListTopicsRequest(), timeout=CALL_TIMEOUT_S
    )
    # Sorted by name; the node's own topics are listed too (readable for audit): the control
    # topic, the delay schedule and the transactions' half and op topics.
    assert [(t.name, t.queue_count) for t in listed.topics] == sorted(
        [
            ("__raftlog_control", 1),
            (SCHEDULE_TOPIC, SCHEDULE_QUEUE_COUNT),
            (HALF_TOPIC, TRANSACTION_QUEUE_COUNT),
            (OP_TOPIC, TRANSACTION_QUEUE_COUNT),
            (TOPIC, QUEUE_COUNT),
            (FAST_TOPIC, 2),
            (GROW_TOPIC, 4),
        ]
    )
    follower = api.consumer(api.follower)
    # QueryByMessageId on a follower: ids are valid on every replica.
    by_id = follower.QueryByMessageId(
        client_pb2.QueryByMessageIdRequest(msg_id=results[6].msg_id.lower()),
        timeout=CALL_TIMEOUT_S,
    )
    assert by_id.message.body == b"rt-1-2"
    assert by_id.message.queue_offset == results[6].queue_offset
    assert by_id.message.physical_offset == results[6].physical_offset
    assert by_id.message.msg_id == results[6].msg_id

    # QueryByKey within a store-time window: batch 1 only.
    def by_key(key: str, begin_ms: int, end_ms: int) -> list[bytes]:
        found = follower.QueryByKey(
            client_pb2.QueryByKeyRequest(
                topic=TOPIC, key=key, begin_timestamp_ms=begin_ms, end_timestamp_ms=end_ms
            ),
            timeout=CALL_TIMEOUT_S,
        )
        return [m.body for m in found.messages]

    assert by_key("rt-shared", stamps[1], stamps[1]) == [b"rt-1-%d" % i for i in (3, 2, 1, 0)]
    assert by_key("rt-shared", 0, 0) == [
        b"rt-%d-%d" % (b, i) for b in (2, 1, 0) for i in (3, 2, 1, 0)
    ]
    assert by_key("rt-key-2-0", stamps[2], stamps[2] + 60_000) == [b"rt-2-0"]
    assert by_key("rt-key-2-0", 0, stamps[2] - 1) == []
    assert by_key("uniq-0-3", 0, 0) == [b"rt-0-3"]
    assert by_key("no-such-key", 0, 0) == []

    # QueryOffsetByTime: the first offset stored at or after a time.
    def offset_at(timestamp_ms: int) -> int:
        return int(
            follower.QueryOffsetByTime(
                client_pb2.QueryOffsetByTimeRequest(
                    topic=TOPIC, queue_id=queue_id, timestamp_ms=timestamp_ms
                ),
                timeout=CALL_TIMEOUT_S,
            ).queue_offset
        )

    assert offset_at(stamps[1]) == first_offset + 4
    assert offset_at(stamps[2]) == first_offset + 8
    assert offset_at(stamps[2] + 1) == first_offset + 12  # none that recent: max
    assert offset_at(0) == 0  # every live one is: min


def test_produce_pull_and_queries_round_trip_through_the_cluster(api: Api) -> None:
    queue_id = 1
    batches, results, first_offset, stamps = _produce_three_batches(api, queue_id)
    wait_applied_everywhere(api.cluster, batches[-1].raft_index)
    for node_id in api.cluster.nodes:
        _check_pulls_on(api, node_id, queue_id, first_offset, results)
    _check_queries_on_a_follower(api, queue_id, first_offset, results, stamps)


# ---------------------------------------------------------------------- long polling


def test_a_long_poll_on_a_follower_returns_soon_after_a_produce_on_the_leader(api: Api) -> None:
    queue_id = 2
    warm = api.produce(produce_request(message(queue_id=queue_id, body=b"before")))  # type: ignore[arg-type]
    wait_applied_everywhere(api.cluster, warm.raft_index)
    end = warm.results[0].queue_offset + 1
    follower = api.consumer(api.follower)
    with ThreadPoolExecutor(max_workers=1) as pool:
        started = time.monotonic()
        poll = pool.submit(
            follower.Pull,
            client_pb2.PullRequest(
                topic=TOPIC, queue_id=queue_id, queue_offset=end, long_poll_timeout_ms=5000
            ),
            timeout=10,
        )
        time.sleep(0.3)
        assert not poll.done(), "the long poll answered before anything was produced"
        produced_at = time.monotonic()
        produced = api.produce(produce_request(message(queue_id=queue_id, body=b"wake-up")))  # type: ignore[arg-type]
        response = poll.result(timeout=10)
        answered_at = time.monotonic()
    assert response.status == PullStatus.PULL_STATUS_FOUND
    assert [m.body for m in response.messages] == [b"wake-up"]
    assert response.messages[0].msg_id == produced.results[0].msg_id
    assert response.next_queue_offset == end + 1
    assert answered_at - produced_at < 2.0, "the poll was not woken by the new message"
    assert answered_at - started < 3.0


def test_a_long_poll_without_news_answers_no_new_messages_after_its_timeout(api: Api) -> None:
    queue_id = 3
    described = api.admin(api.follower).DescribeTopic(
        client_pb2.DescribeTopicRequest(topic=TOPIC), timeout=CALL_TIMEOUT_S
    )
    end = described.queues[queue_id].max_queue_offset
    started = time.monotonic()
    response = api.consumer(api.follower).Pull(
        client_pb2.PullRequest(
            topic=TOPIC, queue_id=queue_id, queue_offset=end, long_poll_timeout_ms=300
        ),
        timeout=CALL_TIMEOUT_S,
    )
    elapsed = time.monotonic() - started
    assert response.status == PullStatus.PULL_STATUS_NO_NEW_MESSAGES
    assert not response.messages and response.next_queue_offset == end
    assert 0.28 <= elapsed < 1.5, f"a 300 ms long poll took {elapsed:.3f} s"


# ---------------------------------------------------------------------- consumer offsets


def test_committed_offsets_are_fetched_back_from_the_leader(api: Api) -> None:
    consumer = api.consumer()
    group = "g-offsets"

    def commit(*offsets: tuple[str, int, int]) -> None:
        consumer.CommitOffsets(
            client_pb2.CommitOffsetsRequest(
                group=group,
                offsets=[
                    client_pb2.QueueOffset(topic=t, queue_id=q, queue_offset=o)
                    for t, q, o in offsets
                ],
            ),
            timeout=CALL_TIMEOUT_S,
        )

    def fetch(*queues: tuple[str, int]) -> list[tuple[str, int, bool, int]]:
        fetched = consumer.FetchOffsets(
            client_pb2.FetchOffsetsRequest(
                group=group, queues=[client_pb2.QueueRef(topic=t, queue_id=q) for t, q in queues]
            ),
            timeout=CALL_TIMEOUT_S,
        )
        return [(o.topic, o.queue_id, o.found, o.queue_offset) for o in fetched.offsets]

    commit((TOPIC, 3, 2), (FAST_TOPIC, 1, 1), (TOPIC, 0, 1))
    commit((TOPIC, 0, 3))  # a later commit replaces the offset
    assert fetch((TOPIC, 0), (TOPIC, 1), (FAST_TOPIC, 1)) == [
        (TOPIC, 0, True, 3),
        (TOPIC, 1, False, 0),
        (FAST_TOPIC, 1, True, 1),
    ]
    # No queues: every queue the group has, sorted by topic then queue id.
    assert fetch() == [(TOPIC, 0, True, 3), (TOPIC, 3, True, 2), (FAST_TOPIC, 1, True, 1)]
    # Another group sees none of them.
    other = consumer.FetchOffsets(
        client_pb2.FetchOffsetsRequest(group="g-other"), timeout=CALL_TIMEOUT_S
    )
    assert list(other.offsets) == []


# ---------------------------------------------------------------------- pre-encoded records


def test_pre_encoded_records_are_stored_with_dense_offsets_and_pull_back_intact(
    api: Api,
) -> None:
    bodies = [b"fast-%d" % i for i in range(5)]
    queue_ids = [0, 1, 0, 0, 1]
    records = b"".join(
        record_bytes(
            FAST_TOPIC,
            queue_id,
            body,
            properties=(("KEYS", f"fk-{i}"), ("TAGS", "pre"), ("origin", "encoded")),
            born_timestamp_ms=1_764_000_000_000 + i,
        )
        for i, (queue_id, body) in enumerate(zip(queue_ids, bodies, strict=True))
    )
    first = api.produce(client_pb2.ProduceRequest(topic=FAST_TOPIC, records=records))
    assert [r.queue_id for r in first.results] == queue_ids
    assert [r.queue_offset for r in first.results] == [0, 0, 1, 2, 1]
    # A second batch continues each queue densely.
    second = api.produce(
        client_pb2.ProduceRequest(
            topic=FAST_TOPIC,
            records=record_bytes(FAST_TOPIC, 1, b"fast-5") + record_bytes(FAST_TOPIC, 0, b"fast-6"),
        )
    )
    assert [(r.queue_id, r.queue_offset) for r in second.results] == [(1, 2), (0, 3)]
    wait_applied_everywhere(api.cluster, second.raft_index)
    results = [*first.results, *second.results]
    for node_id in api.cluster.nodes:
        pulled = {
            queue_id: api.consumer(node_id)
            .Pull(
                client_pb2.PullRequest(topic=FAST_TOPIC, queue_id=queue_id, queue_offset=0),
                timeout=CALL_TIMEOUT_S,
            )
            .messages
            for queue_id in (0, 1)
        }
        assert [m.body for m in pulled[0]] == [b"fast-0", b"fast-2", b"fast-3", b"fast-6"]
        assert [m.body for m in pulled[1]] == [b"fast-1", b"fast-4", b"fast-5"]
        by_body = {m.body: m for queue in pulled.values() for m in queue}
        for i, result in enumerate(results):
            stored = by_body[b"fast-%d" % i]
            assert (stored.queue_id, stored.queue_offset, stored.physical_offset) == (
                result.queue_id,
                result.queue_offset,
                result.physical_offset,
            )
            assert stored.store_timestamp_ms in (
                first.store_timestamp_ms,
                second.store_timestamp_ms,
            )
        fast_1 = by_body[b"fast-1"]
        # What the producer encoded is kept as it encoded it.
        assert (fast_1.born_host.ip, fast_1.born_host.port) == ("10.1.2.3", 4321)
        assert fast_1.born_timestamp_ms == 1_764_000_000_001
        assert fast_1.flag == 7
        assert (list(fast_1.keys), fast_1.tags) == (["fk-1"], "pre")
        assert [(p.name, p.value) for p in fast_1.properties] == [("origin", "encoded")]
    found = api.consumer(api.follower).QueryByMessageId(
        client_pb2.QueryByMessageIdRequest(msg_id=first.results[3].msg_id), timeout=CALL_TIMEOUT_S
    )
    assert found.message.body == b"fast-3"
    by_key = api.consumer(api.follower).QueryByKey(
        client_pb2.QueryByKeyRequest(topic=FAST_TOPIC, key="fk-4"), timeout=CALL_TIMEOUT_S
    )
    assert [m.body for m in by_key.messages] == [b"fast-4"]


def test_pre_encoded_records_get_the_leaders_store_host_and_the_answered_message_ids(
    api: Api,
) -> None:
    """client.proto: store_host is a broker field the producer sends as 0.0.0.0:0 and the
    server overwrites, so a pulled message's store host and msg_id are the ones the Produce
    answered (as for ``messages``)."""
    response = api.produce(
        client_pb2.ProduceRequest(
            topic=FAST_TOPIC,
            records=record_bytes(FAST_TOPIC, 0, b"host-0") + record_bytes(FAST_TOPIC, 1, b"host-1"),
        )
    )
    wait_applied_everywhere(api.cluster, response.raft_index)
    port = int(api.leader_address.rsplit(":", 1)[1])
    for node_id in api.cluster.nodes:
        for result in response.results:
            pulled = api.consumer(node_id).Pull(
                client_pb2.PullRequest(
                    topic=FAST_TOPIC,
                    queue_id=result.queue_id,
                    queue_offset=result.queue_offset,
                    max_messages=1,
                ),
                timeout=CALL_TIMEOUT_S,
            )
            stored = pulled.messages[0]
            assert stored.physical_offset == result.physical_offset
            assert (stored.store_host.ip, stored.store_host.port) == ("127.0.0.1", port)
            assert stored.msg_id == result.msg_id
