"""A seeded gRPC fuzzer for a running cluster (issue 16): it lists every service each node's
reflection names and sends empty, random and mutated requests to every method.

Run ``python -m tests.support.fuzzer --seconds 1200`` (``make fuzz``) for a long run against a
fresh local 3-node cluster; tests/integration/test_fuzz.py runs a short one in ``make test``.

Rules this module keeps:
- Deterministic for a seed: which method, which kind of payload and its bytes come from one
  ``random.Random(seed)``; a finding names the seed, method and payload kind to replay.
- Bounded: at most ``max_calls`` calls and ``budget_s`` seconds; every call has a deadline,
  and one that has not ended ``HANG_SLACK_S`` after it is a finding (a hang).
- A finding is: a call ending INTERNAL or UNKNOWN, a hang, a Raft term that changed during
  the fuzz, a node that no longer answers health SERVING, or a traceback in a node's log.
- Methods that change the term or the membership by design (leadership transfer, member
  add/remove/promote) are not called; nor, when a client port still lists them, are the
  peer services (RaftPeer, HaPeer): they belong on the peer port.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import descriptor, descriptor_pool, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from raftlog.client import Admin, RaftlogError
from raftlog.testing.local_cluster import LOG_FILE, LocalCluster
from raftlog.testing.node_probes import health

# Longer than the node's long-poll margin, short enough for many calls per second.
CALL_DEADLINE_S = 2.0
HANG_SLACK_S = 5.0
# A server-streaming call is read for at most this many responses.
_STREAM_READS = 3
_SKIPPED_METHODS = frozenset(
    {
        "raftlog.v1.Admin.TransferLeadership",
        "raftlog.v1.Admin.AddMember",
        "raftlog.v1.Admin.RemoveMember",
        "raftlog.v1.Admin.PromoteMember",
    }
)
_PEER_SERVICES = ("raftlog.v1.RaftPeer", "raftlog.v1.HaPeer")
_FAILING_CODES = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
PAYLOAD_KINDS = ("empty", "random", "valid", "mutated")


@dataclass(frozen=True)
class Method:
    address: str
    path: str  # "/package.Service/Method"
    full_name: str
    input_type: descriptor.Descriptor
    client_streaming: bool
    server_streaming: bool


@dataclass
class FuzzReport:
    seed: int
    calls: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)
    findings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        codes = ", ".join(f"{code} {count}" for code, count in sorted(self.codes.items()))
        return (
            f"seed {self.seed}: {self.calls} calls ({codes}); skipped {len(self.skipped)} "
            f"methods; {len(self.findings)} findings"
        )


def list_methods(address: str, skipped: set[str]) -> list[Method]:
    """Every method of every service ``address``'s reflection lists, but the skipped ones."""
    with grpc.insecure_channel(address) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        pool = descriptor_pool.DescriptorPool(database)
        methods = []
        for service_name in sorted(database.get_services()):
            service = pool.FindServiceByName(service_name)
            for method in service.methods:
                if method.full_name in _SKIPPED_METHODS or service_name in _PEER_SERVICES:
                    skipped.add(method.full_name)
                    continue
                methods.append(
                    Method(
                        address,
                        f"/{service_name}/{method.name}",
                        method.full_name,
                        method.input_type,
                        method.client_streaming,
                        method.server_streaming,
                    )
                )
    return methods


def valid_message(message_type: descriptor.Descriptor, rng: random.Random) -> bytes:
    """A message of ``message_type`` with random values in its top-level scalar fields."""
    message = message_factory.GetMessageClass(message_type)()
    for field_descriptor in message_type.fields:
        if rng.random() < 0.5 or field_descriptor.is_repeated:
            continue
        kind = field_descriptor.cpp_type
        if kind == field_descriptor.CPPTYPE_STRING:
            value: object = rng.choice(["", "t", "n1", "orders", "x" * rng.randint(1, 300)])
            if field_descriptor.type == field_descriptor.TYPE_BYTES:
                value = rng.randbytes(rng.randint(0, 64))
        elif kind in (field_descriptor.CPPTYPE_INT32, field_descriptor.CPPTYPE_INT64):
            value = rng.choice([0, 1, -1, 7, 2**31 - 1, rng.randint(-1000, 100000)])
        elif kind in (field_descriptor.CPPTYPE_UINT32, field_descriptor.CPPTYPE_UINT64):
            value = rng.choice([0, 1, 2**32 - 1, rng.randint(0, 100000)])
        elif kind == field_descriptor.CPPTYPE_BOOL:
            value = rng.random() < 0.5
        else:
            continue
        try:
            setattr(message, field_descriptor.name, value)
        except (TypeError, ValueError):
            continue
    return bytes(message.SerializeToString())


def payload(kind: str, method: Method, rng: random.Random) -> bytes:
    """The request bytes of one ``kind`` (PAYLOAD_KINDS) for ``method``."""
    if kind == "empty":
        return b""
    if kind == "random":
        return rng.randbytes(rng.randint(1, 256))
    data = bytearray(valid_message(method.input_type, rng))
    if kind == "mutated":
        for _ in range(rng.randint(1, 4)):
            position = rng.randint(0, len(data))
            choice = rng.random()
            if choice < 0.4 and data:
                data[min(position, len(data) - 1)] = rng.randrange(256)
            elif choice < 0.7:
                data[position:position] = rng.randbytes(rng.randint(1, 8))
            else:
                del data[position:]
    return bytes(data)


def call_once(channel: grpc.Channel, method: Method, request: bytes) -> grpc.StatusCode:
    """Send one request; the status the call ended with."""
    try:
        if method.client_streaming and method.server_streaming:
            stream = channel.stream_stream(method.path)(iter([request]), timeout=CALL_DEADLINE_S)
            _drain(stream)
        elif method.client_streaming:
            channel.stream_unary(method.path)(iter([request]), timeout=CALL_DEADLINE_S)
        elif method.server_streaming:
            _drain(channel.unary_stream(method.path)(request, timeout=CALL_DEADLINE_S))
        else:
            channel.unary_unary(method.path)(request, timeout=CALL_DEADLINE_S)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def _drain(responses: Iterator[bytes]) -> None:
    for index, _ in enumerate(responses):
        if index + 1 >= _STREAM_READS:
            responses.cancel()  # type: ignore[attr-defined]
            return


def terms(addresses: Sequence[str]) -> dict[str, int]:
    """Each answering node's current term (ClusterStatus)."""
    found = {}
    with Admin(list(addresses), timeout_s=3.0) as admin:
        for address in addresses:
            try:
                found[address] = admin.cluster_status(address=address).term
            except RaftlogError:
                found[address] = -1
    return found


def settled_terms(addresses: Sequence[str], timeout_s: float = 15.0) -> dict[str, int]:
    """The nodes' terms once they all report the same one (a follower may not have heard of
    the leader's term yet), or as they are after ``timeout_s``."""
    found = terms(addresses)
    for _ in range(int(timeout_s / 0.2)):
        if len(set(found.values())) == 1 and min(found.values()) > 0:
            break
        time.sleep(0.2)
        found = terms(addresses)
    return found


def fuzz(
    addresses: Sequence[str], seed: int, *, max_calls: int, budget_s: float, workers: int = 4
) -> FuzzReport:
    """Fuzz every listed method of every node; findings in the report (see module rules)."""
    report = FuzzReport(seed)
    rng = random.Random(seed)
    methods = [m for address in addresses for m in list_methods(address, report.skipped)]
    before = settled_terms(addresses)
    channels = {address: grpc.insecure_channel(address) for address in addresses}
    deadline = time.monotonic() + budget_s
    try:
        with futures.ThreadPoolExecutor(workers) as pool:
            while report.calls < max_calls and time.monotonic() < deadline:
                batch = []
                for _ in range(min(workers, max_calls - report.calls)):
                    method = rng.choice(methods)
                    kind = rng.choice(PAYLOAD_KINDS)
                    request = payload(kind, method, rng)
                    future = pool.submit(call_once, channels[method.address], method, request)
                    batch.append((method, kind, future))
                for method, kind, future in batch:
                    _record(report, method, kind, future)
    finally:
        for channel in channels.values():
            channel.close()
    after = terms(addresses)
    if before != after:
        report.findings.append(f"terms changed during the fuzz: {before} -> {after}")
    for address in addresses:
        if health(address, timeout_s=3.0) != "SERVING":
            report.findings.append(f"{address} no longer answers health SERVING")
    return report


def _record(report: FuzzReport, method: Method, kind: str, future: futures.Future[object]) -> None:
    report.calls += 1
    where = f"{method.full_name} at {method.address} ({kind} payload, seed {report.seed})"
    try:
        code = future.result(timeout=CALL_DEADLINE_S + HANG_SLACK_S)
    except futures.TimeoutError:
        report.findings.append(f"hang: {where}")
        return
    name = code.name  # type: ignore[attr-defined]
    report.codes[name] = report.codes.get(name, 0) + 1
    if code in _FAILING_CODES:
        report.findings.append(f"{name}: {where}")


def log_tracebacks(cluster: LocalCluster) -> list[str]:
    """The nodes whose log holds a traceback."""
    found = []
    for node_id, node in cluster.nodes.items():
        text = (Path(node.data_dir) / LOG_FILE).read_text(errors="replace")
        if "Traceback" in text:
            found.append(f"traceback in {node_id}'s log")
    return found


def run_against_local_cluster(
    base_dir: str, seed: int, *, max_calls: int, budget_s: float
) -> FuzzReport:
    """Start a 3-node local cluster, fuzz it, stop it; its findings include the nodes killed
    at stop, abort files left behind and tracebacks in the logs."""
    with LocalCluster(base_dir, 3, 0) as cluster:
        cluster.start(60.0)
        report = fuzz(cluster.addresses, seed, max_calls=max_calls, budget_s=budget_s)
        killed = cluster.stop(timeout_s=15.0)
    report.findings.extend(f"{node_id} had to be killed at stop" for node_id in killed)
    for node_id, node in cluster.nodes.items():
        if (Path(node.data_dir) / "store" / "abort").exists():
            report.findings.append(f"{node_id} left its store's abort file")
    report.findings.extend(log_tracebacks(cluster))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1200.0)
    parser.add_argument("--calls", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--data-dir", default=None, help="default: a new temporary directory")
    args = parser.parse_args(argv)
    base_dir = args.data_dir or tempfile.mkdtemp(prefix="raftlog-fuzz-")
    report = run_against_local_cluster(
        base_dir, args.seed, max_calls=args.calls, budget_s=args.seconds
    )
    print(report.summary())
    print(f"skipped: {', '.join(sorted(report.skipped)) or 'none'}; logs under {base_dir}")
    for finding in report.findings:
        print(f"FINDING {finding}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
