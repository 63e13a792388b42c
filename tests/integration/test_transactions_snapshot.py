"""A member that installs a snapshot and then leads still decides transactions correctly.

The leader's transaction state is derived from the half and op topics' records and two
watermarks kept as consumer offsets (node/messaging/transaction_table.py), both of which a
snapshot carries (the retained segments; the control state). Here a follower is down while
three transactions are made -- committed, rolled back, left undecided and checked back
meanwhile -- after enough filler that retention deletes the first segments, so the follower
catches up by installing a snapshot. Once it leads: ending the decided ones again answers
their recorded decisions and stores nothing, and the undecided one is checked back (its
check count continued, not restarted) and committed exactly once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.client import Admin, Message, Producer, TransactionState
from raftlog.testing.local_cluster import LocalCluster
from tests.integration.test_failover import leader_address, wait_converged
from tests.integration.test_segment_transfer import segment_names
from tests.integration.test_snapshot_control_state import produce_filler
from tests.integration.test_transactions import (
    COMMIT,
    ROLLBACK,
    create,
    decision,
    end_again,
    settled_count,
    wait_for,
)

pytestmark = pytest.mark.integration

NODE_ARGS = (
    "--segment-size-bytes", str(64 << 10),
    "--max-body-bytes", str(16 << 10),
    "--file-reserved-hours", "0",
    "--disk-clean-watermark-ratio", "0.0001",
    "--transaction-timeout-ms", "1000",
    "--transaction-check-interval-ms", "1000",
    "--transaction-check-max", "1000",
)  # fmt: skip
TOPIC = "tx-snapshot"
GROUP = "tx-snapshot-producers"
RETENTION_WAIT_S = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    running = LocalCluster(str(tmp_path / "data"), base_port=0, extra_args=NODE_ARGS)
    running.start(wait_timeout_s=30)
    try:
        yield running
    finally:
        running.stop()


def test_a_member_that_installed_a_snapshot_decides_transactions_once_it_leads(
    cluster: LocalCluster,
) -> None:
    servers = cluster.addresses
    leader = leader_address(cluster)
    leader_id = next(n for n, node in cluster.nodes.items() if node.address == leader)
    follower = next(n for n in cluster.nodes if n != leader_id)
    create(cluster, TOPIC)
    with Admin(servers) as admin:
        admin.create_topic("filler", 1)
    wait_converged(cluster)
    cluster.stop_node(follower)
    produce_filler(leader)
    with Producer(servers, group=GROUP) as producer:
        sent = {
            state: producer.send_in_transaction(
                TOPIC, state.value.encode(), local_transaction=lambda m, s=state: s
            )
            for state in TransactionState
        }
    committed, rolled_back, undecided = (sent[s] for s in TransactionState)
    # Retention runs every few seconds: the undecided transaction is checked back meanwhile
    # (nobody answers), so its count goes up on this leader.
    leader_dir = Path(cluster.nodes[leader_id].data_dir)
    deadline = time.monotonic() + RETENTION_WAIT_S
    while segment_names(str(leader_dir))[0] == "0" * 20:
        assert time.monotonic() < deadline, "retention deleted nothing on the leader"
        time.sleep(0.5)

    cluster.restart(follower)
    wait_converged(cluster, timeout_s=30.0)
    log = (Path(cluster.nodes[follower].data_dir) / "node.log").read_text()
    assert "installed snapshot" in log
    with Admin(servers) as admin:
        new_leader = admin.transfer_leadership(follower).leader_address
    checks: list[Message] = []

    def checker(message: Message) -> TransactionState:
        checks.append(message)
        return TransactionState.COMMIT

    for result, asked, recorded in (
        (committed, ROLLBACK, COMMIT),
        (rolled_back, COMMIT, ROLLBACK),
    ):
        again = end_again(
            new_leader, GROUP, TOPIC, result.transaction_id, result.half.msg_id, asked
        )
        assert (again.resolution, again.duplicate) == (recorded, True)
    with Producer(servers, group=GROUP, transaction_checker=checker, transaction_topics=[TOPIC]):
        wait_for(
            lambda: decision(servers, undecided.half.queue_offset) == "commit",
            "the new leader to check the undecided transaction back",
        )
    first_check = int(dict(checks[0].properties)["TRANSACTION_CHECK_TIMES"])
    assert first_check > 1, "the check count restarted with the new leader"
    assert {m.uniq_key for m in checks} == {undecided.transaction_id}
    settled_count(servers, TOPIC, committed.transaction_id, 1)
    settled_count(servers, TOPIC, rolled_back.transaction_id, 0)
    settled_count(servers, TOPIC, undecided.transaction_id, 1)
