"""A node whose disk fills up, in a raftlog:dev container whose data directory is a 64 MiB
tmpfs: writes are refused with RESOURCE_EXHAUSTED naming the limit, nothing acknowledged is
lost, the node neither stops nor changes its term, and writes resume once space returns.

The disk fills up with produces on top of a ballast file (another user of the disk), and space
returns when the ballast goes: retention would free space by deleting acknowledged messages,
which is not what this test is about. Two limits:
- the watermark (``disk_full_ratio``, default 0.9): refused before anything is proposed;
- the device itself (``disk_full_ratio`` 1.0, so only ENOSPC stops writes): the leader's Raft
  log append fails part way; the write it was carrying stays unacknowledged (the client's
  deadline passes: unknown outcome), later writes are refused, and the entry is written when
  space returns (ready.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
import pytest

from raftlog.chaos.target import read_queues
from raftlog.proto import client_pb2, client_pb2_grpc
from raftlog.testing import RaftlogCluster

pytestmark = pytest.mark.containers

TOPIC = "disk"
TMPFS_MIB = 64
BALLAST_MIB = 40
BODY_BYTES = 64 * 1024
MAX_SENDS = 1000  # 64 MiB in 64 KiB bodies: the disk is full long before
FILL_WITHIN_S = 30.0
RESUME_WITHIN_S = 15.0
SEND_TIMEOUT_S = 3.0


@dataclass
class Fill:
    acked: list[bytes] = field(default_factory=list)
    unknown: list[bytes] = field(default_factory=list)
    refusal: grpc.RpcError | None = None


@pytest.fixture
def node(raftlog_image: str, request: pytest.FixtureRequest) -> Iterator[RaftlogCluster]:
    """One node on a small tmpfs; ``request.param``: its disk_full_ratio (None: the default)."""
    env = {} if request.param is None else {"RAFTLOG_DISK_FULL_RATIO": request.param}
    with RaftlogCluster(raftlog_image, nodes=1, env=env, data_tmpfs_mib=TMPFS_MIB) as cluster:
        yield cluster


def body(number: int) -> bytes:
    head = b"m-%06d-" % number
    return head + b"x" * (BODY_BYTES - len(head))


def produce(stub: client_pb2_grpc.ProducerStub, payload: bytes) -> None:
    stub.Produce(
        client_pb2.ProduceRequest(topic=TOPIC, messages=[client_pb2.ProduceMessage(body=payload)]),
        timeout=SEND_TIMEOUT_S,
    )


def fill(stub: client_pb2_grpc.ProducerStub) -> Fill:
    """Send until a write is refused (bounded by count and time)."""
    filled = Fill()
    deadline = time.monotonic() + FILL_WITHIN_S
    for number in range(MAX_SENDS):
        if time.monotonic() > deadline:
            break
        payload = body(number)
        try:
            produce(stub, payload)
        except grpc.RpcError as error:
            if error.code() is not grpc.StatusCode.DEADLINE_EXCEEDED:
                filled.refusal = error
                return filled
            filled.unknown.append(payload)  # it may still be stored
        else:
            filled.acked.append(payload)
    return filled


def stored_bodies(address: str) -> list[bytes]:
    queues = read_queues(address, TOPIC)
    return [text.encode() for _, text in queues[(TOPIC, 0)]]


def shell(cluster: RaftlogCluster, command: str) -> None:
    code, output = cluster.nodes["n1"].container.exec(["sh", "-c", command])
    assert code == 0, f"{command}: {output!r}"


@pytest.mark.parametrize(
    ("node", "refusal_names"),
    [(None, "disk_full_ratio"), ("1.0", "no space left on the device")],
    indirect=["node"],
    ids=["watermark", "device-full"],
)
def test_a_full_disk_refuses_writes_cleanly_and_they_resume(
    node: RaftlogCluster, refusal_names: str
) -> None:
    cluster = node
    address = cluster.address_map[cluster.addresses[0]]
    with cluster.admin() as admin:
        admin.create_topic(TOPIC, 1)
    term = cluster.wait_for_leader()[1]
    pid = cluster.pid("n1")
    shell(cluster, f"head -c {BALLAST_MIB}M /dev/zero > /data/ballast")
    with grpc.insecure_channel(address) as channel:
        stub = client_pb2_grpc.ProducerStub(channel)
        filled = fill(stub)
        refusal = filled.refusal
        assert refusal is not None, f"no refusal after {len(filled.acked)} acks"
        assert refusal.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, refusal
        assert refusal_names in (refusal.details() or ""), refusal.details()
        assert len(filled.unknown) <= 1, "more than the write the disk refused part way"
        # Nothing acknowledged is lost, nothing is stored twice, and no refused write is
        # stored: what is there is the acknowledged writes, then perhaps the unknown one.
        stored = stored_bodies(address)
        assert stored[: len(filled.acked)] == filled.acked
        assert stored[len(filled.acked) :] in ([], filled.unknown)
        shell(cluster, "rm /data/ballast")
        resumed_at = time.monotonic() + RESUME_WITHIN_S
        while True:
            try:
                produce(stub, b"after")
                break
            except grpc.RpcError:
                assert time.monotonic() < resumed_at, "writes did not resume"
                time.sleep(0.2)
    stored = stored_bodies(address)
    assert stored[: len(filled.acked)] == filled.acked
    assert stored[len(filled.acked) :] in ([b"after"], [*filled.unknown, b"after"])
    # The same process, in the same term, all along.
    assert cluster.pid("n1") == pid and cluster.wait_for_leader()[1] == term
