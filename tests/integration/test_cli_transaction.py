"""`raftlog transaction list|commit` against a real 3-node cluster: a transaction left
undecided (its local transaction answers UNKNOWN, no checker) is listed, committed by the
operator, then seen once by a consumer of its topic and listed no more; ending it again
answers "decided already"."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from raftlog.cli import main
from raftlog.client import Admin, Consumer, Message, NotFoundError, Producer, TransactionState
from raftlog.testing.local_cluster import LocalCluster

pytestmark = pytest.mark.integration

WAIT_S = 20.0
GROUP = "cli-ops-producer"
TOPIC = "cli-transaction-orders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("cli-transaction")
    running = LocalCluster(str(base / "data"), base_port=0, durability="write")
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def cli(capsys: pytest.CaptureFixture[str], cluster: LocalCluster, *argv: str) -> str:
    code = main([*argv, "--servers", ",".join(cluster.addresses), "--timeout-s", "10"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_an_operator_lists_and_commits_an_undecided_transaction(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    with Admin(cluster.addresses) as admin:
        admin.create_topic(TOPIC, 2)
        for address in cluster.addresses:

            def known(a: str = address) -> bool:
                try:
                    admin.describe_topic(TOPIC, address=a)
                except NotFoundError:
                    return False
                return True

            wait_for(known, f"{address} to learn {TOPIC}")

    def unknown(message: Message) -> TransactionState:
        return TransactionState.UNKNOWN

    with Producer(cluster.addresses, group=GROUP) as producer:
        sent = producer.send_in_transaction(TOPIC, b"order #1", local_transaction=unknown)
    assert sent.state is TransactionState.UNKNOWN
    transaction_id, msg_id = sent.transaction_id, sent.half.msg_id

    listed = ""

    def is_listed() -> bool:
        nonlocal listed
        listed = cli(capsys, cluster, "transaction", "list", "--topic", TOPIC)
        return transaction_id in listed

    wait_for(is_listed, "the undecided transaction to be listed")
    row = next(line.split() for line in listed.splitlines() if transaction_id in line)
    assert row[:4] == [transaction_id, GROUP, TOPIC, msg_id]
    other = cli(capsys, cluster, "transaction", "list", "--group", "another-group")
    assert transaction_id not in other

    end = ("--group", GROUP, "--topic", TOPIC, "--id", transaction_id, "--msg-id", msg_id)
    decided = cli(capsys, cluster, "transaction", "commit", *end)
    assert "commit now" in decided, decided
    again = cli(capsys, cluster, "transaction", "rollback", *end)
    assert "decided already (commit)" in again, again

    seen: list[Message] = []
    with Consumer(cluster.addresses, "cli-transaction-reader", TOPIC, from_beginning=True) as c:
        deadline = time.monotonic() + WAIT_S
        while not seen and time.monotonic() < deadline:
            seen += c.poll(0.5)
        seen += c.poll(1.0)  # and nothing more
    assert [(m.uniq_key, m.body) for m in seen] == [(transaction_id, b"order #1")]
    assert transaction_id not in cli(capsys, cluster, "transaction", "list", "--topic", TOPIC)


def test_produce_in_a_transaction(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = cli(capsys, cluster, "produce", TOPIC, "order #2", "--transaction", "commit")
    assert "group=raftlog-cli-producer: COMMIT stored id=" in committed, committed
    rolled_back = cli(capsys, cluster, "produce", TOPIC, "order #3", "--transaction", "rollback")
    assert ": ROLLBACK" in rolled_back and "stored" not in rolled_back, rolled_back
    left = cli(capsys, cluster, "produce", TOPIC, "order #4", "--transaction", "unknown")
    transaction_id = left.split()[1]
    assert ": UNKNOWN" in left, left
    listed = cli(capsys, cluster, "transaction", "list", "--group", "raftlog-cli-producer")
    assert transaction_id in listed, listed
