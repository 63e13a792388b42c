"""The gRPC API definitions: generated modules, service shapes, wire round trips, and that the
committed generated code is exactly what ``proto/generate.sh`` makes from the .proto files."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import any_pb2
from google.protobuf.descriptor import FieldDescriptor, ServiceDescriptor

from raftlog.proto import (
    client_pb2,
    client_pb2_grpc,
    errors_pb2,
    peer_pb2,
    peer_pb2_grpc,
)
from raftlog.raft import types as raft_types

PROTO_DIR = Path(__file__).resolve().parents[3] / "proto"

UNARY = (False, False)
SERVER_STREAMING = (False, True)
BIDI_STREAMING = (True, True)

# service name -> {method: (client streaming, server streaming)}
EXPECTED_METHODS: dict[str, dict[str, tuple[bool, bool]]] = {
    "raftlog.v1.Producer": {
        "Produce": UNARY,
        "EndTransaction": UNARY,
        "TransactionChecks": SERVER_STREAMING,
    },
    "raftlog.v1.Consumer": {
        "Pull": UNARY,
        "QueryByKey": UNARY,
        "QueryOffsetByTime": UNARY,
        "QueryByMessageId": UNARY,
        "CommitOffsets": UNARY,
        "FetchOffsets": UNARY,
        "SendBack": UNARY,
        "Heartbeat": UNARY,
        "LockQueues": UNARY,
        "UnlockQueues": UNARY,
    },
    "raftlog.v1.Admin": {
        "CreateTopic": UNARY,
        "ListTopics": UNARY,
        "DescribeTopic": UNARY,
        "ClusterStatus": UNARY,
        "TransferLeadership": UNARY,
        "ListMembers": UNARY,
        "AddMember": UNARY,
        "PromoteMember": UNARY,
        "RemoveMember": UNARY,
    },
    "raftlog.v1.RaftPeer": {
        "Messages": BIDI_STREAMING,
        "FetchSegments": SERVER_STREAMING,
    },
}


def _service(full_name: str) -> ServiceDescriptor:
    for module in (client_pb2, peer_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            if service.full_name == full_name:
                return service
    raise AssertionError(f"no service {full_name}")


def _field_names(message: Any) -> set[str]:
    return set(message.DESCRIPTOR.fields_by_name)


def test_generated_modules_import_under_raftlog_proto() -> None:
    for name in ("client", "peer", "errors"):
        for suffix in ("_pb2", "_pb2_grpc"):
            module = importlib.import_module(f"raftlog.proto.{name}{suffix}")
            assert module.__name__ == f"raftlog.proto.{name}{suffix}"
    # The descriptors keep the canonical proto path and package (what reflection and other
    # languages see), independent of the flat Python layout.
    assert client_pb2.DESCRIPTOR.name == "raftlog/v1/client.proto"
    assert client_pb2.DESCRIPTOR.package == "raftlog.v1"
    assert peer_pb2.DESCRIPTOR.name == "raftlog/v1/peer.proto"
    # The grpc modules use the same message classes as the _pb2 modules.
    assert getattr(client_pb2_grpc, "raftlog_dot_v1_dot_client__pb2") is client_pb2  # noqa: B009
    assert getattr(peer_pb2_grpc, "raftlog_dot_v1_dot_peer__pb2") is peer_pb2  # noqa: B009


@pytest.mark.parametrize("service_name", sorted(EXPECTED_METHODS))
def test_services_have_every_method_with_its_streaming_kind(service_name: str) -> None:
    service = _service(service_name)
    actual = {
        method.name: (method.client_streaming, method.server_streaming)
        for method in service.methods
    }
    assert actual == EXPECTED_METHODS[service_name]


def test_stubs_and_servicers_exist_for_every_service() -> None:
    for module, names in (
        (client_pb2_grpc, ("Producer", "Consumer", "Admin")),
        (peer_pb2_grpc, ("RaftPeer",)),
    ):
        for name in names:
            assert hasattr(module, f"{name}Stub")
            assert hasattr(module, f"{name}Servicer")
            assert hasattr(module, f"add_{name}Servicer_to_server")


def test_peer_enums_mirror_the_raft_core() -> None:
    for member in raft_types.MessageType:
        assert peer_pb2.MessageType.Value(f"MESSAGE_TYPE_{member.name}") == member.value
    for entry_type in raft_types.EntryType:
        assert peer_pb2.EntryType.Value(f"ENTRY_TYPE_{entry_type.name}") == entry_type.value
    # Every field of the core's Message has a counterpart of the same name.
    core_fields = set(raft_types.Message.__dataclass_fields__)
    assert core_fields <= _field_names(peer_pb2.RaftMessage)
    assert set(raft_types.Entry.__dataclass_fields__) <= _field_names(peer_pb2.Entry)
    assert {"index", "term", "voters", "learners"} <= _field_names(peer_pb2.SnapshotMeta)


def test_pulled_message_carries_every_record_field() -> None:
    assert {
        "topic",
        "queue_id",
        "queue_offset",
        "physical_offset",
        "msg_id",
        "born_timestamp_ms",
        "store_timestamp_ms",
        "born_host",
        "store_host",
        "flag",
        "sys_flag",
        "reconsume_times",
        "keys",
        "tags",
        "properties",
        "body",
    } <= _field_names(client_pb2.StoredMessage)
    assert {"next_queue_offset", "min_queue_offset", "max_queue_offset", "messages"} <= (
        _field_names(client_pb2.PullResponse)
    )


def test_offsets_are_signed_64_bit_and_raft_indexes_unsigned() -> None:
    int64, uint64 = FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64
    for message, field, kind in (
        (client_pb2.StoredMessage, "queue_offset", int64),
        (client_pb2.StoredMessage, "physical_offset", int64),
        (client_pb2.ProduceResult, "queue_offset", int64),
        (client_pb2.ProduceResult, "physical_offset", int64),
        (client_pb2.PullRequest, "queue_offset", int64),
        (client_pb2.QueueOffset, "queue_offset", int64),
        (peer_pb2.SegmentData, "segment_start_offset", int64),
        (peer_pb2.FetchSegmentsRequest, "from_physical_offset", int64),
        (peer_pb2.RaftMessage, "log_index", uint64),
        (peer_pb2.Entry, "index", uint64),
        (client_pb2.ClusterStatusResponse, "commit_index", uint64),
    ):
        assert message.DESCRIPTOR.fields_by_name[field].type == kind, (message, field)


def test_produce_batch_round_trips() -> None:
    request = client_pb2.ProduceRequest(
        topic="orders",
        producer_id="4b1c0e9e-producer",
        sequence=7,
        messages=[
            client_pb2.ProduceMessage(
                queue_id=3,
                keys=["order-1", "customer-9"],
                tags="created",
                uniq_key="u-1",
                properties=[client_pb2.Property(name="region", value="eu")],
                body=b"\x00\x01payload",
                born_timestamp_ms=1_700_000_000_000,
            ),
            client_pb2.ProduceMessage(sharding_key="customer-9", body=b"second"),
            client_pb2.ProduceMessage(body=b""),
        ],
    )
    wire = request.SerializeToString()
    decoded = client_pb2.ProduceRequest.FromString(wire)
    assert decoded == request
    assert [m.WhichOneof("queue") for m in decoded.messages] == [
        "queue_id",
        "sharding_key",
        None,
    ]
    assert list(decoded.messages[0].keys) == ["order-1", "customer-9"]
    assert decoded.messages[0].properties[0].value == "eu"
    assert decoded.sequence == 7

    fast_path = client_pb2.ProduceRequest(topic="orders", records=b"\x00\x00\x00\x10" * 8)
    assert client_pb2.ProduceRequest.FromString(fast_path.SerializeToString()) == fast_path


def test_not_leader_detail_packs_into_the_status_details() -> None:
    detail = errors_pb2.NotLeader(leader_id="n2", leader_address="10.0.0.2:9000", term=5)
    packed = any_pb2.Any()
    packed.Pack(detail)
    assert packed.type_url == "type.googleapis.com/raftlog.v1.NotLeader"
    status = errors_pb2.RpcStatus(code=9, message="not leader", details=[packed])
    decoded = errors_pb2.RpcStatus.FromString(status.SerializeToString())
    unpacked = errors_pb2.NotLeader()
    assert decoded.details[0].Unpack(unpacked)
    assert unpacked == detail
    # RpcStatus is google.rpc.Status on the wire: code=1 int32, message=2, details=3 Any.
    fields = errors_pb2.RpcStatus.DESCRIPTOR.fields_by_name
    assert (fields["code"].number, fields["message"].number, fields["details"].number) == (1, 2, 3)
    assert fields["details"].message_type.full_name == "google.protobuf.Any"


def test_segment_chunk_is_data_or_done() -> None:
    data = peer_pb2.SegmentChunk(
        data=peer_pb2.SegmentData(
            segment_start_offset=1 << 30, file_offset=4096, data=b"abc", data_crc32=1
        )
    )
    done = peer_pb2.SegmentChunk(
        done=peer_pb2.SegmentsDone(
            snapshot=peer_pb2.SnapshotMeta(index=10, term=2, voters=["a", "b", "c"]),
            end_physical_offset=(1 << 30) + 4099,
        )
    )
    assert peer_pb2.SegmentChunk.FromString(data.SerializeToString()).WhichOneof("chunk") == (
        "data"
    )
    assert peer_pb2.SegmentChunk.FromString(done.SerializeToString()) == done


def test_committed_generated_code_matches_the_proto_files(tmp_path: Path) -> None:
    """Regenerate into a temporary directory with the same script; every generated file must
    be byte-identical to the committed one, and there must be no stale extra ones."""
    pytest.importorskip("grpc_tools")
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(
        ["bash", str(PROTO_DIR / "generate.sh"), str(tmp_path)],
        check=True,
        env=env,
        capture_output=True,
        timeout=60,
    )
    fresh = sorted(p.name for p in tmp_path.iterdir())
    committed = sorted(p.name for p in PROTO_DIR.iterdir() if p.is_file() and "_pb2" in p.name)
    assert fresh, "generate.sh produced nothing"
    assert committed == fresh, "stale or missing generated files: run `make proto`"
    for name in fresh:
        assert (PROTO_DIR / name).read_bytes() == (tmp_path / name).read_bytes(), (
            f"proto/{name} differs from what the .proto files generate: run `make proto` "
            "(never edit generated code by hand)"
        )
