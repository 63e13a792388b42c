"""Access rules on a 3-node cluster of real node processes (acl_enable, tokens for three
clients, ``admin`` the superuser), through the typed client and the `raftlog acl` CLI:

- nothing is allowed until a rule grants it; a grant on a prefix covers its topics only;
- a refused call is PERMISSION_DENIED naming the client and the permission, writes nothing and
  never moves the Raft term; a revoke takes effect on the next call;
- rules travel through the log: every member lists the same ones, also after a restart;
- the CLI checks permissions before sending (exit 2), relays refusals (exit 1);
- with mTLS and no tokens, a client certificate's common name is the subject.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.client import (
    AclRule,
    Admin,
    ClientTls,
    Connection,
    Consumer,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    Producer,
)
from raftlog.proto import client_pb2
from raftlog.testing import dev_ca
from raftlog.testing.local_cluster import CLIENT_NAME, LocalCluster

TOKENS = {
    CLIENT_NAME: "admin-token-0123456789",
    "alice": "alice-token-0123456789",
    "bob": "bob-token-01234567890",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("acl-cluster")
    tokens_file = base / "tokens"
    tokens_file.write_text("".join(f"{name}:{token}\n" for name, token in TOKENS.items()))
    tokens_file.chmod(0o600)
    running = LocalCluster(
        str(base / "data"),
        base_port=0,
        auth_token=TOKENS[CLIENT_NAME],
        extra_args=(
            "--auth-tokens-file", str(tokens_file),
            "--acl-enable", "true",
            "--acl-superusers", CLIENT_NAME,
        ),
    )  # fmt: skip
    running.start(45.0)
    try:
        with Admin(Connection(running.addresses, token=TOKENS[CLIENT_NAME])) as admin:
            admin.create_topic("orders-eu", 1)
            admin.create_topic("payments", 1)
        yield running
    finally:
        running.stop()


def connection(cluster: LocalCluster, client: str) -> Connection:
    return Connection(cluster.addresses, token=TOKENS[client])


def term(cluster: LocalCluster) -> int:
    with Admin(connection(cluster, CLIENT_NAME)) as admin:
        return admin.cluster_status().term


def test_nothing_is_allowed_until_granted_and_a_revoke_takes_effect(
    cluster: LocalCluster,
) -> None:
    term_before = term(cluster)
    with Admin(connection(cluster, CLIENT_NAME)) as root:
        leader = _leader(root)
        payments_before = root.describe_topic("payments", address=leader).queues[0]
        with Producer(connection(cluster, "alice")) as alice:
            with pytest.raises(PermissionDeniedError, match="'alice' may not produce"):
                alice.send("orders-eu", b"before the grant")
            root.grant_acl("alice", "orders-*", ["produce"])
            alice.send("orders-eu", b"granted")
            with pytest.raises(PermissionDeniedError, match="topic 'payments'"):
                alice.send("payments", b"not covered by orders-*")
            root.revoke_acl("alice", "orders-*")
            with pytest.raises(PermissionDeniedError):
                alice.send("orders-eu", b"after the revoke")
        assert root.describe_topic("payments", address=leader).queues[0] == payments_before
    assert term(cluster) == term_before


def test_consume_admin_and_open_calls(cluster: LocalCluster) -> None:
    with Admin(connection(cluster, CLIENT_NAME)) as root:
        root.grant_acl("bob", "orders-eu", ["consume"])
        with Producer(connection(cluster, CLIENT_NAME)) as producer:
            result = producer.send("payments", b"secret")
        _wait_visible(root, result.msg_id)
    with Admin(connection(cluster, "bob")) as bob:
        assert "payments" in [t.name for t in bob.list_topics()]  # metadata stays open
        with pytest.raises(PermissionDeniedError, match="may not admin topic 'bob-topic'"):
            bob.create_topic("bob-topic", 1)
        with pytest.raises(PermissionDeniedError, match="may not admin the cluster"):
            bob.list_acls()
        with pytest.raises(PermissionDeniedError, match="may not consume topic 'payments'"):
            bob.query_by_id(result.msg_id)  # checked on the message found
    with Consumer(
        connection(cluster, "bob"), group="bobs", topic="orders-eu", from_beginning=True
    ) as consumer:
        deadline = time.monotonic() + 10.0
        bodies: list[bytes] = []
        while b"granted" not in bodies and time.monotonic() < deadline:
            bodies += [m.body for m in consumer.poll(timeout_s=1.0)]
        assert b"granted" in bodies
        consumer.commit()
    with (
        Consumer(connection(cluster, "bob"), group="g", topic="payments") as denied,
        pytest.raises(PermissionDeniedError),
    ):
        denied.poll(timeout_s=1.0)


def test_rules_replicate_and_survive_a_restart(cluster: LocalCluster) -> None:
    with Admin(connection(cluster, CLIENT_NAME)) as root:
        root.grant_acl("*", "public-*", ["consume", "produce"])
        expected = root.list_acls()
        assert AclRule("*", "public-*", ("consume", "produce")) in expected
        follower = next(n for n in cluster.nodes if cluster.nodes[n].address != _leader(root))
        cluster.restart(follower)
        address = cluster.nodes[follower].address
        deadline = time.monotonic() + 15.0
        while root.list_acls(address=address) != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert root.list_acls(address=address) == expected
        with pytest.raises(InvalidArgumentError, match="topic_pattern"):
            root.grant_acl("bob", "orders.*", ["consume"])


def _wait_visible(admin: Admin, msg_id: str) -> None:
    """Until every member serves ``msg_id`` (a follower may not have applied it yet)."""
    for address in [m.address for m in admin.list_members()]:
        deadline = time.monotonic() + 10.0
        while True:
            try:
                admin.connection.call(
                    "Consumer",
                    "QueryByMessageId",
                    client_pb2.QueryByMessageIdRequest(msg_id=msg_id),
                    timeout_s=5.0,
                    leader_only=False,
                    write=False,
                    address=address,
                )
                break
            except NotFoundError:
                assert time.monotonic() < deadline, f"{msg_id} never visible at {address}"
                time.sleep(0.1)


def _leader(admin: Admin) -> str:
    leader = admin.cluster_status().leader_address
    assert leader is not None
    return leader


def acl_cli(
    cluster: LocalCluster, client: str, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    token_file = tmp_path / f"{client}.token"
    token_file.write_text(TOKENS[client])
    command = [sys.executable, "-m", "raftlog.cli", "acl", *args]
    command += ["--servers", ",".join(cluster.addresses), "--token-file", str(token_file)]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RAFTLOG_TOKEN": ""},
    )


def test_the_cli_grants_lists_and_relays_refusals(cluster: LocalCluster, tmp_path: Path) -> None:
    granted = acl_cli(cluster, CLIENT_NAME, tmp_path, "grant", "carol", "audit-*", "consume")
    assert granted.returncode == 0, granted.stderr
    listed = acl_cli(cluster, CLIENT_NAME, tmp_path, "list", "--subject", "carol")
    assert listed.stdout.splitlines() == [
        "SUBJECT  TOPICS   PERMISSIONS",
        "carol    audit-*  consume",
    ]
    usage = acl_cli(cluster, CLIENT_NAME, tmp_path, "grant", "carol", "audit-*", "write")
    assert (usage.returncode, "unknown permission 'write'" in usage.stderr) == (2, True)
    refused = acl_cli(cluster, "bob", tmp_path, "grant", "bob", "*", "all")
    assert refused.returncode == 1
    assert "'bob' may not admin the cluster" in refused.stderr
    revoked = acl_cli(cluster, CLIENT_NAME, tmp_path, "revoke", "carol", "audit-*")
    assert revoked.returncode == 0, revoked.stderr
    assert acl_cli(cluster, CLIENT_NAME, tmp_path, "list", "--subject", "carol").stdout.strip() == (
        "SUBJECT  TOPICS  PERMISSIONS"
    )


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("acl-mtls")
    extra = ("--acl-enable", "true", "--acl-superusers", CLIENT_NAME)
    running = LocalCluster(str(base / "data"), base_port=0, tls=True, extra_args=extra)
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def test_a_client_certificate_names_the_subject(tls_cluster: LocalCluster) -> None:
    cert_file, key_file = dev_ca.issue(tls_cluster.tls_dir, "alice")
    alice_tls = ClientTls(os.path.join(tls_cluster.tls_dir, "ca.pem"), cert_file, key_file)
    with Admin(Connection(tls_cluster.addresses, tls=tls_cluster.client_tls)) as root:
        root.create_topic("orders-eu", 1)
        with Producer(Connection(tls_cluster.addresses, tls=alice_tls)) as alice:
            with pytest.raises(PermissionDeniedError, match="'alice' may not produce"):
                alice.send("orders-eu", b"before the grant")
            root.grant_acl("alice", "orders-eu", ["produce"])
            assert alice.send("orders-eu", b"granted").queue_offset == 0
