# mypy: ignore-errors
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MessageType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MESSAGE_TYPE_UNSPECIFIED: _ClassVar[MessageType]
    MESSAGE_TYPE_PRE_VOTE: _ClassVar[MessageType]
    MESSAGE_TYPE_PRE_VOTE_RESP: _ClassVar[MessageType]
    MESSAGE_TYPE_VOTE: _ClassVar[MessageType]
    MESSAGE_TYPE_VOTE_RESP: _ClassVar[MessageType]
    MESSAGE_TYPE_APPEND: _ClassVar[MessageType]
    MESSAGE_TYPE_APPEND_RESP: _ClassVar[MessageType]
    MESSAGE_TYPE_HEARTBEAT: _ClassVar[MessageType]
    MESSAGE_TYPE_HEARTBEAT_RESP: _ClassVar[MessageType]
    MESSAGE_TYPE_SNAPSHOT: _ClassVar[MessageType]
    MESSAGE_TYPE_TIMEOUT_NOW: _ClassVar[MessageType]
    MESSAGE_TYPE_READ_INDEX: _ClassVar[MessageType]
    MESSAGE_TYPE_READ_INDEX_RESP: _ClassVar[MessageType]

class EntryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENTRY_TYPE_NORMAL: _ClassVar[EntryType]
    ENTRY_TYPE_CONF_CHANGE: _ClassVar[EntryType]
MESSAGE_TYPE_UNSPECIFIED: MessageType
MESSAGE_TYPE_PRE_VOTE: MessageType
MESSAGE_TYPE_PRE_VOTE_RESP: MessageType
MESSAGE_TYPE_VOTE: MessageType
MESSAGE_TYPE_VOTE_RESP: MessageType
MESSAGE_TYPE_APPEND: MessageType
MESSAGE_TYPE_APPEND_RESP: MessageType
MESSAGE_TYPE_HEARTBEAT: MessageType
MESSAGE_TYPE_HEARTBEAT_RESP: MessageType
MESSAGE_TYPE_SNAPSHOT: MessageType
MESSAGE_TYPE_TIMEOUT_NOW: MessageType
MESSAGE_TYPE_READ_INDEX: MessageType
MESSAGE_TYPE_READ_INDEX_RESP: MessageType
ENTRY_TYPE_NORMAL: EntryType
ENTRY_TYPE_CONF_CHANGE: EntryType

class SlaveReport(_message.Message):
    __slots__ = ("cluster_id", "broker_name", "node_id", "max_offset", "flushed_offset", "epoch", "epochs")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FLUSHED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    broker_name: str
    node_id: str
    max_offset: int
    flushed_offset: int
    epoch: int
    epochs: _containers.RepeatedCompositeFieldContainer[EpochEntry]
    def __init__(self, cluster_id: _Optional[str] = ..., broker_name: _Optional[str] = ..., node_id: _Optional[str] = ..., max_offset: _Optional[int] = ..., flushed_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., epochs: _Optional[_Iterable[_Union[EpochEntry, _Mapping]]] = ...) -> None: ...

class EpochEntry(_message.Message):
    __slots__ = ("epoch", "start_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    start_offset: int
    def __init__(self, epoch: _Optional[int] = ..., start_offset: _Optional[int] = ...) -> None: ...

class CommitLogChunk(_message.Message):
    __slots__ = ("physical_offset", "data", "data_crc32", "master_max_offset", "confirm_offset", "master_epoch", "truncate", "epochs")
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DATA_CRC32_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    physical_offset: int
    data: bytes
    data_crc32: int
    master_max_offset: int
    confirm_offset: int
    master_epoch: int
    truncate: bool
    epochs: _containers.RepeatedCompositeFieldContainer[EpochEntry]
    def __init__(self, physical_offset: _Optional[int] = ..., data: _Optional[bytes] = ..., data_crc32: _Optional[int] = ..., master_max_offset: _Optional[int] = ..., confirm_offset: _Optional[int] = ..., master_epoch: _Optional[int] = ..., truncate: _Optional[bool] = ..., epochs: _Optional[_Iterable[_Union[EpochEntry, _Mapping]]] = ...) -> None: ...

class Entry(_message.Message):
    __slots__ = ("index", "term", "type", "data")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    type: EntryType
    data: bytes
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., type: _Optional[_Union[EntryType, str]] = ..., data: _Optional[bytes] = ...) -> None: ...

class SnapshotMeta(_message.Message):
    __slots__ = ("index", "term", "voters", "learners")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    voters: _containers.RepeatedScalarFieldContainer[str]
    learners: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., voters: _Optional[_Iterable[str]] = ..., learners: _Optional[_Iterable[str]] = ...) -> None: ...

class RaftMessage(_message.Message):
    __slots__ = ("type", "source", "target", "term", "log_term", "log_index", "entries", "commit", "reject", "reject_hint", "hint_term", "snapshot", "context")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    REJECT_HINT_FIELD_NUMBER: _ClassVar[int]
    HINT_TERM_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    type: MessageType
    source: str
    target: str
    term: int
    log_term: int
    log_index: int
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    commit: int
    reject: bool
    reject_hint: int
    hint_term: int
    snapshot: SnapshotMeta
    context: bytes
    def __init__(self, type: _Optional[_Union[MessageType, str]] = ..., source: _Optional[str] = ..., target: _Optional[str] = ..., term: _Optional[int] = ..., log_term: _Optional[int] = ..., log_index: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., commit: _Optional[int] = ..., reject: _Optional[bool] = ..., reject_hint: _Optional[int] = ..., hint_term: _Optional[int] = ..., snapshot: _Optional[_Union[SnapshotMeta, _Mapping]] = ..., context: _Optional[bytes] = ...) -> None: ...

class RaftMessageBatch(_message.Message):
    __slots__ = ("cluster_id", "messages")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    messages: _containers.RepeatedCompositeFieldContainer[RaftMessage]
    def __init__(self, cluster_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[RaftMessage, _Mapping]]] = ...) -> None: ...

class FetchSegmentsRequest(_message.Message):
    __slots__ = ("cluster_id", "node_id", "snapshot", "from_physical_offset", "max_chunk_bytes", "with_control_state")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    FROM_PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    WITH_CONTROL_STATE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    node_id: str
    snapshot: SnapshotMeta
    from_physical_offset: int
    max_chunk_bytes: int
    with_control_state: bool
    def __init__(self, cluster_id: _Optional[str] = ..., node_id: _Optional[str] = ..., snapshot: _Optional[_Union[SnapshotMeta, _Mapping]] = ..., from_physical_offset: _Optional[int] = ..., max_chunk_bytes: _Optional[int] = ..., with_control_state: _Optional[bool] = ...) -> None: ...

class SegmentData(_message.Message):
    __slots__ = ("segment_start_offset", "segment_size_bytes", "file_offset", "data", "data_crc32")
    SEGMENT_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    FILE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DATA_CRC32_FIELD_NUMBER: _ClassVar[int]
    segment_start_offset: int
    segment_size_bytes: int
    file_offset: int
    data: bytes
    data_crc32: int
    def __init__(self, segment_start_offset: _Optional[int] = ..., segment_size_bytes: _Optional[int] = ..., file_offset: _Optional[int] = ..., data: _Optional[bytes] = ..., data_crc32: _Optional[int] = ...) -> None: ...

class SegmentsDone(_message.Message):
    __slots__ = ("snapshot", "end_physical_offset")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    END_PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    snapshot: SnapshotMeta
    end_physical_offset: int
    def __init__(self, snapshot: _Optional[_Union[SnapshotMeta, _Mapping]] = ..., end_physical_offset: _Optional[int] = ...) -> None: ...

class ControlStateData(_message.Message):
    __slots__ = ("applied_index", "position", "data", "data_crc32", "total_bytes")
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DATA_CRC32_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    position: int
    data: bytes
    data_crc32: int
    total_bytes: int
    def __init__(self, applied_index: _Optional[int] = ..., position: _Optional[int] = ..., data: _Optional[bytes] = ..., data_crc32: _Optional[int] = ..., total_bytes: _Optional[int] = ...) -> None: ...

class SegmentChunk(_message.Message):
    __slots__ = ("data", "done", "control_state")
    DATA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    CONTROL_STATE_FIELD_NUMBER: _ClassVar[int]
    data: SegmentData
    done: SegmentsDone
    control_state: ControlStateData
    def __init__(self, data: _Optional[_Union[SegmentData, _Mapping]] = ..., done: _Optional[_Union[SegmentsDone, _Mapping]] = ..., control_state: _Optional[_Union[ControlStateData, _Mapping]] = ...) -> None: ...
