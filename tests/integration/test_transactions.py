"""Issue 18's transactional messages through the typed client against a real 3-node cluster:
COMMIT, ROLLBACK and UNKNOWN-then-COMMIT (the check-back), a transaction nobody answers
rolled back after the last check, a producer SIGKILLed between its half message and its
commit (another producer of its group answers the check: COMMIT makes the message appear
exactly once, ROLLBACK never), and the leader SIGKILLed during the check-back (each message
ends committed once or rolled back, never both, never twice). A consumer of the topic sees
only committed messages, never a half.

The nodes check back fast (``--transaction-timeout-ms 1000``, an interval of 1 s, at most 4
checks) so the module stays short. "Exactly once" is counted by the transaction id (the
message's uniq_key) through the IndexFile on every member, after the cluster converged."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest

from raftlog.client import (
    Admin,
    Consumer,
    InvalidArgumentError,
    Message,
    NotFoundError,
    Producer,
    TransactionState,
)
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import LocalCluster

pytestmark = pytest.mark.integration

CHECK_MAX = 4
NODE_ARGS = (
    "--transaction-timeout-ms", "1000",
    "--transaction-check-interval-ms", "1000",
    "--transaction-check-max", str(CHECK_MAX),
)  # fmt: skip
WAIT_S = 30.0
COMMIT = client_pb2.TRANSACTION_RESOLUTION_COMMIT
ROLLBACK = client_pb2.TRANSACTION_RESOLUTION_ROLLBACK
# The killed producer: sends one half message, says where it is, and hangs in its local
# transaction until it is SIGKILLed.
KILLED_PRODUCER = """
import json, sys, time
from raftlog.client import Producer
servers, group, topic, body = sys.argv[1:5]
producer = Producer(servers, group=group)
def hang(message):
    print(json.dumps([message.uniq_key, message.msg_id, message.queue_offset]), flush=True)
    time.sleep(3600)
producer.send_in_transaction(topic, body.encode(), local_transaction=hang)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("transactions")
    running = LocalCluster(
        str(base / "data"), base_port=0, durability="write", extra_args=NODE_ARGS
    )
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def create(cluster: LocalCluster, topic: str) -> None:
    """Create ``topic`` and wait until every member knows it."""
    with Admin(cluster.addresses) as admin:
        admin.create_topic(topic, 2)
        for address in cluster.addresses:
            wait_for(lambda a=address: known(admin, topic, a), f"{address} to learn {topic}")


def known(admin: Admin, topic: str, address: str) -> bool:
    try:
        admin.describe_topic(topic, address=address)
    except NotFoundError:
        return False
    return True


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def committed_counts(addresses: list[str], topic: str, transaction_id: str) -> list[int]:
    """How many messages of ``topic`` each member holds for ``transaction_id`` (its own
    IndexFile: QueryByKey asked of each member)."""
    counts = []
    for address in addresses:
        with grpc.insecure_channel(address) as channel:
            response = client_pb2_grpc.ConsumerStub(channel).QueryByKey(
                client_pb2.QueryByKeyRequest(topic=topic, key=transaction_id, max_messages=8),
                timeout=10,
            )
        counts.append(len(response.messages))
    return counts


def settled_count(addresses: list[str], topic: str, transaction_id: str, expected: int) -> None:
    """Every member holds ``expected`` messages of the transaction, and still does a second
    later (a duplicate would show by then)."""
    wait_for(
        lambda: committed_counts(addresses, topic, transaction_id) == [expected] * len(addresses),
        f"{transaction_id} to be stored {expected} time(s) on every member",
    )
    time.sleep(1.0)
    assert committed_counts(addresses, topic, transaction_id) == [expected] * len(addresses)


def end_again(
    leader: str, group: str, topic: str, transaction_id: str, msg_id: str, resolution: int
) -> client_pb2.EndTransactionResponse:
    """EndTransaction sent once more, by hand: the recorded decision comes back."""
    with grpc.insecure_channel(leader) as channel:
        response: client_pb2.EndTransactionResponse = client_pb2_grpc.ProducerStub(
            channel
        ).EndTransaction(
            client_pb2.EndTransactionRequest(
                producer_group=group,
                topic=topic,
                transaction_id=transaction_id,
                msg_id=msg_id,
                resolution=resolution,
            ),
            timeout=10,
        )
    return response


def decision(addresses: list[str], half_queue_offset: int) -> str | None:
    """The decision the op records hold for the half at ``half_queue_offset`` ("commit",
    "rollback"), as the first member that answers shows it; None while there is none. Read
    only: it never decides anything itself."""
    for address in addresses:
        try:
            with grpc.insecure_channel(address) as channel:
                response = client_pb2_grpc.ConsumerStub(channel).QueryByKey(
                    client_pb2.QueryByKeyRequest(
                        topic="RMQ_SYS_TRANS_OP_HALF_TOPIC",
                        key=str(half_queue_offset),
                        max_messages=64,
                    ),
                    timeout=5,
                )
        except grpc.RpcError:
            continue  # down (the killed leader): ask the next
        for op in response.messages:
            kind = {p.name: p.value for p in op.properties}.get("TRAN_OP")
            if op.body == str(half_queue_offset).encode() and kind in ("commit", "rollback"):
                return kind
        return None
    return None


def leader_of(cluster: LocalCluster) -> str:
    address = cluster.leader_address(timeout_s=5.0)
    assert address is not None
    return address


def consume(addresses: list[str], group: str, topic: str, count: int) -> list[Message]:
    """Read ``topic`` until ``count`` messages came and one more second passed quietly."""
    received: list[Message] = []
    deadline = time.monotonic() + WAIT_S
    with Consumer(addresses, group, topic, from_beginning=True) as consumer:
        while time.monotonic() < deadline:
            batch = consumer.poll(0.2)
            received += batch
            if len(received) >= count and not batch:
                quiet_until = time.monotonic() + 1.0
                while time.monotonic() < quiet_until:
                    received += consumer.poll(0.2)
                break
    return received


def test_commit_rollback_and_unknown_then_commit(cluster: LocalCluster) -> None:
    topic, group = "tx-paths", "tx-paths-producers"
    create(cluster, topic)
    servers = cluster.addresses
    with Producer(servers, group=group) as producer:
        committed = producer.send_in_transaction(
            topic, b"commit", local_transaction=lambda m: TransactionState.COMMIT
        )
        rolled_back = producer.send_in_transaction(
            topic, b"rollback", local_transaction=lambda m: TransactionState.ROLLBACK
        )
        unknown = producer.send_in_transaction(
            topic, b"unknown", local_transaction=lambda m: TransactionState.UNKNOWN
        )
        with pytest.raises(InvalidArgumentError, match="written only by the node"):
            producer.send("RMQ_SYS_TRANS_HALF_TOPIC", b"forged")
    assert committed.committed and committed.result is not None
    assert rolled_back.state is TransactionState.ROLLBACK
    assert unknown.state is TransactionState.UNKNOWN
    checked: list[Message] = []

    def checker(message: Message) -> TransactionState:
        checked.append(message)
        return TransactionState.COMMIT

    with Producer(servers, group=group, transaction_checker=checker, transaction_topics=[topic]):
        settled_count(servers, topic, unknown.transaction_id, 1)
    assert {m.uniq_key for m in checked} == {unknown.transaction_id}
    assert checked[0].body == b"unknown" and checked[0].msg_id == unknown.half.msg_id
    for result in (committed, unknown):
        settled_count(servers, topic, result.transaction_id, 1)
    settled_count(servers, topic, rolled_back.transaction_id, 0)
    # Ending again changes nothing: the recorded decision comes back, nothing is stored.
    leader = leader_of(cluster)
    again = end_again(
        leader, group, topic, committed.transaction_id, committed.half.msg_id, ROLLBACK
    )
    assert (again.resolution, again.duplicate) == (COMMIT, True)
    again = end_again(
        leader, group, topic, rolled_back.transaction_id, rolled_back.half.msg_id, COMMIT
    )
    assert (again.resolution, again.duplicate) == (ROLLBACK, True)
    settled_count(servers, topic, committed.transaction_id, 1)
    settled_count(servers, topic, rolled_back.transaction_id, 0)
    # A consumer sees the two committed messages only, as commits of their halves.
    received = consume(servers, "tx-paths-readers", topic, 2)
    assert sorted(m.body for m in received) == [b"commit", b"unknown"]
    halves = {committed.transaction_id: committed.half, unknown.transaction_id: unknown.half}
    for message in received:
        assert message.sys_flag & 0xC == 0x8
        assert message.prepared_transaction_offset == halves[message.uniq_key].physical_offset


def test_a_transaction_nobody_answers_is_rolled_back_after_the_last_check(
    cluster: LocalCluster,
) -> None:
    topic, group = "tx-unanswered", "tx-unanswered-producers"
    create(cluster, topic)
    servers = cluster.addresses
    checks: list[Message] = []

    def checker(message: Message) -> TransactionState:
        checks.append(message)
        return TransactionState.UNKNOWN

    with Producer(
        servers, group=group, transaction_checker=checker, transaction_topics=[topic]
    ) as producer:
        sent = producer.send_in_transaction(
            topic, b"never", local_transaction=lambda m: TransactionState.UNKNOWN
        )
        wait_for(
            lambda: decision(servers, sent.half.queue_offset) is not None,
            "the leader to roll the transaction back",
        )
    leader = leader_of(cluster)
    again = end_again(leader, group, topic, sent.transaction_id, sent.half.msg_id, COMMIT)
    assert (again.resolution, again.duplicate) == (ROLLBACK, True)
    times = [dict(m.properties)["TRANSACTION_CHECK_TIMES"] for m in checks]
    assert times == [str(n) for n in range(1, CHECK_MAX + 1)]
    settled_count(servers, topic, sent.transaction_id, 0)


def start_killed_producer(servers: list[str], group: str, topic: str) -> tuple[str, str, int]:
    """Run a producer in a subprocess until its half is stored, then SIGKILL it inside its
    local transaction; returns the transaction id, the half's msg_id and queue offset."""
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_PRODUCER, ",".join(servers), group, topic, "orphan"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # bounded: the producer's own timeouts end it
        transaction_id, msg_id, half_offset = json.loads(line)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    return transaction_id, msg_id, half_offset


@pytest.mark.parametrize("answer", [TransactionState.COMMIT, TransactionState.ROLLBACK])
def test_a_killed_producers_transaction_is_decided_by_another_of_its_group(
    cluster: LocalCluster, answer: TransactionState
) -> None:
    topic = f"tx-orphan-{answer.value.lower()}"
    group = f"{topic}-producers"
    create(cluster, topic)
    servers = cluster.addresses
    transaction_id, msg_id, half_offset = start_killed_producer(servers, group, topic)
    asked: list[str] = []

    def checker(message: Message) -> TransactionState:
        asked.append(message.uniq_key)
        return answer

    with Producer(servers, group=group, transaction_checker=checker, transaction_topics=[topic]):
        wait_for(
            lambda: decision(servers, half_offset) is not None,
            "the checker's answer to be recorded",
        )
    assert set(asked) == {transaction_id}
    leader = leader_of(cluster)
    expected = 1 if answer is TransactionState.COMMIT else 0
    settled_count(servers, topic, transaction_id, expected)
    again = end_again(leader, group, topic, transaction_id, msg_id, COMMIT)
    assert again.resolution == (COMMIT if expected else ROLLBACK)


def test_a_leader_killed_during_the_check_back_decides_each_transaction_once(
    cluster: LocalCluster,
) -> None:
    topic, group = "tx-leader-kill", "tx-leader-kill-producers"
    create(cluster, topic)
    servers = cluster.addresses
    with Producer(servers, group=group) as producer:
        sent = [
            producer.send_in_transaction(
                topic, b"tx-%d" % n, local_transaction=lambda m: TransactionState.UNKNOWN
            )
            for n in range(6)
        ]
    answers = {s.transaction_id: n % 2 == 0 for n, s in enumerate(sent)}
    leader_id = next(n for n, node in cluster.nodes.items() if node.address == leader_of(cluster))
    killed = threading.Event()

    def checker(message: Message) -> TransactionState:
        if not killed.is_set():
            killed.set()
            cluster.kill(leader_id)  # the first check's answer goes to a dead leader
        return TransactionState.COMMIT if answers[message.uniq_key] else TransactionState.ROLLBACK

    survivors = [node.address for n, node in cluster.nodes.items() if n != leader_id]
    try:
        with Producer(
            servers, group=group, transaction_checker=checker, transaction_topics=[topic]
        ):
            for result in sent:
                wait_for(
                    lambda r=result: decision(survivors, r.half.queue_offset) is not None,
                    f"{result.transaction_id} to be decided",
                )
        assert killed.is_set()
        for result in sent:
            commit = answers[result.transaction_id]
            settled_count(survivors, topic, result.transaction_id, 1 if commit else 0)
            again = end_again(
                leader_of_survivors(cluster, leader_id),
                group,
                topic,
                result.transaction_id,
                result.half.msg_id,
                ROLLBACK if commit else COMMIT,
            )
            assert (again.resolution, again.duplicate) == (COMMIT if commit else ROLLBACK, True)
    finally:
        cluster.restart(leader_id)
    for result in sent:
        expected = 1 if answers[result.transaction_id] else 0
        settled_count(cluster.addresses, topic, result.transaction_id, expected)


def leader_of_survivors(cluster: LocalCluster, killed_id: str) -> str:
    survivors = [n for n in cluster.nodes if n != killed_id]
    address: str | None = None

    def elected() -> bool:
        nonlocal address
        address = cluster.leader_address(timeout_s=1.0, node_ids=survivors)
        return address is not None and address != cluster.nodes[killed_id].address

    wait_for(elected, "a leader among the survivors")
    assert address is not None
    return address


def test_racing_ends_of_one_transaction_decide_it_once(cluster: LocalCluster) -> None:
    """Eight ends sent at once, half COMMIT and half ROLLBACK: one decides, the other seven
    are answered with that decision as duplicates, and the message is stored that often."""
    topic, group = "tx-race", "tx-race-producers"
    create(cluster, topic)
    servers = cluster.addresses
    with Producer(servers, group=group) as producer:
        sent = producer.send_in_transaction(
            topic, b"race", local_transaction=lambda m: TransactionState.UNKNOWN
        )
    leader = leader_of(cluster)
    answers: list[client_pb2.EndTransactionResponse] = []
    start = threading.Barrier(8)

    def end(resolution: int) -> None:
        start.wait(10)
        answers.append(
            end_again(leader, group, topic, sent.transaction_id, sent.half.msg_id, resolution)
        )

    threads = [
        threading.Thread(target=end, args=(COMMIT if n % 2 else ROLLBACK,)) for n in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 8
    assert len({a.resolution for a in answers}) == 1
    assert sorted(a.duplicate for a in answers) == [False] + [True] * 7
    stored = 1 if answers[0].resolution == COMMIT else 0
    settled_count(servers, topic, sent.transaction_id, stored)
