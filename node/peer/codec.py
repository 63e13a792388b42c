"""Conversion between the Raft core's values (raftlog.raft.types) and the peer protocol's
messages (proto/raftlog/v1/peer.proto).

Rules this module keeps: enum numbers are the core's IntEnum values on both sides, so a
conversion is a cast; ``decode_message`` refuses what the core cannot take (an unknown type,
a SNAPSHOT without its meta) with ValueError, so a malformed peer message never reaches
``step``.
"""

from __future__ import annotations

from raftlog.proto import peer_pb2
from raftlog.raft.types import ConfState, Entry, EntryType, Message, MessageType, SnapshotMeta


def encode_snapshot_meta(meta: SnapshotMeta) -> peer_pb2.SnapshotMeta:
    return peer_pb2.SnapshotMeta(
        index=meta.index,
        term=meta.term,
        voters=list(meta.conf_state.voters),
        learners=list(meta.conf_state.learners),
    )


def decode_snapshot_meta(meta: peer_pb2.SnapshotMeta) -> SnapshotMeta:
    return SnapshotMeta(
        meta.index,
        meta.term,
        ConfState(voters=tuple(sorted(meta.voters)), learners=tuple(sorted(meta.learners))),
    )


def encode_message(message: Message) -> peer_pb2.RaftMessage:
    encoded = peer_pb2.RaftMessage(
        type=int(message.type),  # type: ignore[arg-type]
        source=message.source,
        target=message.target,
        term=message.term,
        log_term=message.log_term,
        log_index=message.log_index,
        entries=[
            peer_pb2.Entry(
                index=entry.index,
                term=entry.term,
                type=int(entry.type),  # type: ignore[arg-type]
                data=entry.data,
            )
            for entry in message.entries
        ],
        commit=message.commit,
        reject=message.reject,
        reject_hint=message.reject_hint,
        hint_term=message.hint_term,
        context=message.context,
    )
    if message.snapshot is not None:
        encoded.snapshot.CopyFrom(encode_snapshot_meta(message.snapshot))
    return encoded


def decode_message(encoded: peer_pb2.RaftMessage) -> Message:
    try:
        message_type = MessageType(encoded.type)
        entries = tuple(
            Entry(entry.index, entry.term, EntryType(entry.type), entry.data)
            for entry in encoded.entries
        )
    except ValueError as error:
        raise ValueError(f"malformed raft message from {encoded.source!r}: {error}") from error
    snapshot = decode_snapshot_meta(encoded.snapshot) if encoded.HasField("snapshot") else None
    if message_type is MessageType.SNAPSHOT and snapshot is None:
        raise ValueError(f"SNAPSHOT message from {encoded.source!r} without its meta")
    return Message(
        type=message_type,
        source=encoded.source,
        target=encoded.target,
        term=encoded.term,
        log_term=encoded.log_term,
        log_index=encoded.log_index,
        entries=entries,
        commit=encoded.commit,
        reject=encoded.reject,
        reject_hint=encoded.reject_hint,
        hint_term=encoded.hint_term,
        snapshot=snapshot,
        context=encoded.context,
    )
