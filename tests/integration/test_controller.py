"""The master-slave controller: three real pysyncobj members with their gRPC services on
127.0.0.1, brokers played by the test (heartbeats from this process). The first master is
elected, a silent master is replaced from the in-sync set with a new epoch once its lease has
run out (never before), stale or foreign in-sync changes are refused, the group survives the
loss of its leading member, and bad input gets clear statuses."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from raftlog.controller.client import ControllerClient, ControllerRefused, HeartbeatReply
from raftlog.controller.config import ConfigError, ControllerConfig, parse_controller_peers
from raftlog.controller.server import ControllerServer
from raftlog.proto import controller_pb2, controller_pb2_grpc
from tests.support.inprocess_cluster import free_port

LEASE_MS = 1000
GROUP = "broker-a"


class Controllers:
    def __init__(self, root: Path) -> None:
        self.peers = {
            f"c{i}": (f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}") for i in (1, 2, 3)
        }
        self.servers = {
            member_id: ControllerServer(
                ControllerConfig(
                    member_id=member_id,
                    peers=dict(self.peers),
                    data_dir=str(root / member_id),
                    password="test-secret",
                    lease_ms=LEASE_MS,
                )
            )
            for member_id in self.peers
        }
        for server in self.servers.values():
            server.start()

    @property
    def addresses(self) -> list[str]:
        return [grpc_address for _, grpc_address in self.peers.values()]

    def leading(self) -> str | None:
        leaders = [m for m, s in self.servers.items() if s.member.leading]
        return leaders[0] if len(leaders) == 1 else None

    def stop(self, member_id: str) -> None:
        self.servers.pop(member_id).stop()

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[Controllers]:
    group = Controllers(tmp_path)
    try:
        yield group
    finally:
        group.close()


def beat_until(
    client: ControllerClient,
    offsets: dict[str, int],
    done: object,
    timeout_s: float = 10.0,
) -> dict[str, HeartbeatReply]:
    """Heartbeat every broker in ``offsets`` every 100 ms until ``done(replies)``."""
    deadline = time.monotonic() + timeout_s
    replies: dict[str, HeartbeatReply] = {}
    while time.monotonic() < deadline:
        for node_id, offset in offsets.items():
            try:
                replies[node_id] = client.heartbeat(GROUP, node_id, f"{node_id}:7701", offset, 0)
            except Exception:  # no leader yet: keep beating, bounded by the deadline
                continue
        if replies and done(replies):  # type: ignore[operator]
            return replies
        time.sleep(0.1)
    raise AssertionError(f"not done within {timeout_s} s: {replies}")


def test_election_lease_and_failover(controllers: Controllers) -> None:
    client = ControllerClient(controllers.addresses)
    brokers = {"b1": 500, "b2": 300, "b3": 400}
    replies = beat_until(client, brokers, lambda r: all(x.group.master_id for x in r.values()))
    first = replies["b1"].group
    assert (first.master_id, first.master_epoch) == ("b1", 1)  # the largest log
    assert replies["b1"].lease_ms == LEASE_MS and replies["b2"].lease_ms == 0
    # Stale epoch, a non-master, and a master dropping itself are all refused.
    with pytest.raises(ControllerRefused, match="not the master"):
        client.alter_in_sync(GROUP, "b2", 1, ["b2"])
    with pytest.raises(ControllerRefused, match="not the master of epoch 0"):
        client.alter_in_sync(GROUP, "b1", 0, ["b1"])
    with pytest.raises(ControllerRefused, match="must stay"):
        client.alter_in_sync(GROUP, "b1", 1, ["b2"])
    assert client.alter_in_sync(GROUP, "b1", 1, ["b1", "b3"]).in_sync == ("b1", "b3")
    # b1 goes silent: b3 (in sync) is elected, b2 (not in sync, however alive) never is; not
    # before b1's lease has run out.
    client.heartbeat(GROUP, "b1", "b1:7701", 500, 1)  # b1's last word
    silent_at = time.monotonic()
    replies = beat_until(client, {"b2": 300, "b3": 400}, lambda r: r["b3"].group.master_id == "b3")
    took_s = time.monotonic() - silent_at
    assert replies["b3"].group.master_epoch == 2
    # The controller measures from when it received b1's heartbeat, just before silent_at.
    assert took_s >= LEASE_MS / 1000 - 0.05
    print(f"silent master -> new master visible: {took_s:.2f} s (lease {LEASE_MS} ms)")
    client.close()


def test_the_group_survives_its_leading_member(controllers: Controllers) -> None:
    client = ControllerClient(controllers.addresses)
    beat_until(client, {"b1": 10}, lambda r: r["b1"].group.master_id == "b1")
    deadline = time.monotonic() + 10
    while controllers.leading() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    leader = controllers.leading()
    assert leader is not None
    stopped_at = time.monotonic()
    controllers.stop(leader)
    replies = beat_until(client, {"b1": 10}, lambda r: r["b1"].lease_ms > 0)
    print(f"controller leader lost -> lease granted again: {time.monotonic() - stopped_at:.2f} s")
    assert (replies["b1"].group.master_id, replies["b1"].group.master_epoch) == ("b1", 1)
    client.close()


def test_bad_requests_get_clear_statuses(controllers: Controllers) -> None:
    client = ControllerClient(controllers.addresses)
    beat_until(client, {"b1": 0}, lambda r: True)
    leading = controllers.leading()
    assert leading is not None
    stub = controller_pb2_grpc.ControllerStub(grpc.insecure_channel(controllers.peers[leading][1]))
    for request in (
        controller_pb2.HeartbeatRequest(broker_name="", node_id="x", address="a:1"),
        controller_pb2.HeartbeatRequest(broker_name="g", node_id="x" * 100, address="a:1"),
        controller_pb2.HeartbeatRequest(broker_name="g", node_id="x", address=""),
        controller_pb2.HeartbeatRequest(broker_name="g", node_id="x", address="a:1", max_offset=-1),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            stub.Heartbeat(request, timeout=5)
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    follower = next(m for m in controllers.servers if m != leading)
    other = controller_pb2_grpc.ControllerStub(
        grpc.insecure_channel(controllers.peers[follower][1])
    )
    with pytest.raises(grpc.RpcError) as not_leader:
        other.GetGroup(controller_pb2.GetGroupRequest(broker_name=GROUP), timeout=5)
    assert not_leader.value.code() is grpc.StatusCode.UNAVAILABLE
    assert controllers.peers[leading][1] in (not_leader.value.details() or "")
    client.close()


def test_unsafe_settings_are_refused(tmp_path: Path) -> None:
    peers = ",".join(f"c{i}=127.0.0.1:781{i}/127.0.0.1:780{i}" for i in (1, 2, 3))
    good = {"member_id": "c1", "peers": parse_controller_peers(peers), "data_dir": str(tmp_path)}
    with pytest.raises(ConfigError, match="password: required"):
        ControllerConfig(**good, password="")  # type: ignore[arg-type]
    wildcard = parse_controller_peers(peers.replace("127.0.0.1:7811", "0.0.0.0:7811"))
    with pytest.raises(ConfigError, match="wildcard"):
        ControllerConfig(member_id="c1", peers=wildcard, data_dir=str(tmp_path), password="p")
    same_port = parse_controller_peers(peers.replace("127.0.0.1:7811", "127.0.0.1:7801"))
    with pytest.raises(ConfigError, match="must differ"):
        ControllerConfig(member_id="c1", peers=same_port, data_dir=str(tmp_path), password="p")
    with pytest.raises(ConfigError, match="odd number"):
        ControllerConfig(
            member_id="c1",
            peers=dict(list(parse_controller_peers(peers).items())[:2]),
            data_dir=str(tmp_path),
            password="p",
        )
