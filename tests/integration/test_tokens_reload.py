"""The tokens file reloads without a restart (node setting auth_tokens_file): a running node
whose file is rewritten atomically (a temporary file, then os.replace) takes a new client's
token within about 2 s, refuses a removed client's with UNAUTHENTICATED, and keeps its
tokens when the new file is malformed, saying so in one log line that holds no token."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing.local_cluster import CLIENT_NAME, LOG_FILE, LocalCluster

FIRST = "first-0123456789abcdef"
SECOND = "second-fedcba9876543210"
# The node looks at the file at most once a second; a change shows within this.
RELOAD_DEADLINE_S = 2.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("tokens-reload")
    running = LocalCluster(str(base / "data"), node_count=1, base_port=0, auth_token=FIRST)
    running.start(45.0)
    try:
        yield running
    finally:
        running.stop()


def tokens_file(cluster: LocalCluster) -> Path:
    """Where LocalCluster(auth_token=...) writes the file its nodes read."""
    return Path(cluster.base_dir) / "auth-tokens"


def rewrite(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(text)
    temporary.chmod(0o600)
    os.replace(temporary, path)


def answer(cluster: LocalCluster, token: str) -> grpc.StatusCode:
    """The status of one ListTopics call with ``token``."""
    with grpc.insecure_channel(cluster.addresses[0]) as channel:
        stub = client_pb2_grpc.AdminStub(channel)
        try:
            stub.ListTopics(
                client_pb2.ListTopicsRequest(),
                timeout=5,
                metadata=[("authorization", f"Bearer {token}")],
            )
        except grpc.RpcError as error:
            assert isinstance(error, grpc.Call)
            code: grpc.StatusCode = error.code()
            return code
    return grpc.StatusCode.OK


def wait_for(cluster: LocalCluster, token: str, code: grpc.StatusCode) -> float:
    """Seconds until a call with ``token`` answers ``code``; fails after the deadline."""
    started = time.monotonic()
    while (got := answer(cluster, token)) is not code:
        elapsed_s = time.monotonic() - started
        assert elapsed_s < RELOAD_DEADLINE_S, f"still {got.name} after {elapsed_s:.1f} s"
        time.sleep(0.05)
    return time.monotonic() - started


def test_tokens_reload_without_a_restart(cluster: LocalCluster) -> None:
    path = tokens_file(cluster)
    node = cluster.nodes["n1"]
    pid = node.pid
    assert answer(cluster, FIRST) is grpc.StatusCode.OK
    assert answer(cluster, SECOND) is grpc.StatusCode.UNAUTHENTICATED

    # A second client is added: its token works without a restart.
    rewrite(path, f"{CLIENT_NAME}:{FIRST}\nsecond:{SECOND}\n")
    added_s = wait_for(cluster, SECOND, grpc.StatusCode.OK)
    assert answer(cluster, FIRST) is grpc.StatusCode.OK

    # The first client's line is removed: its token is refused from then on.
    rewrite(path, f"second:{SECOND}\n")
    revoked_s = wait_for(cluster, FIRST, grpc.StatusCode.UNAUTHENTICATED)
    assert answer(cluster, SECOND) is grpc.StatusCode.OK

    # A malformed rewrite (a token too short) is not taken: the previous tokens stay.
    log = Path(node.data_dir) / LOG_FILE
    logged_before = log.read_text()
    rewrite(path, f"second:{SECOND}\nthird:short-secret\n")
    deadline = time.monotonic() + RELOAD_DEADLINE_S + 1.0
    while time.monotonic() < deadline:
        assert answer(cluster, SECOND) is grpc.StatusCode.OK
        assert answer(cluster, FIRST) is grpc.StatusCode.UNAUTHENTICATED
        time.sleep(0.1)
    new_lines = log.read_text()[len(logged_before) :].splitlines()
    warnings = [line for line in new_lines if "not reloaded" in line]
    assert len(warnings) == 1, new_lines
    assert "line 2" in warnings[0] and "short-secret" not in warnings[0]
    assert all(token not in line for line in new_lines for token in (FIRST, SECOND))

    assert node.pid == pid  # the same process throughout
    print(f"\nnew token taken after {added_s:.2f} s, removed one refused after {revoked_s:.2f} s")
