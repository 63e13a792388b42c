"""raftlog.store: the single-node storage engine (CommitLog, ConsumeQueue, IndexFile).

Rules: knows nothing of Raft, gRPC or nodes; imports only the standard library and itself.
Formats follow docs/store-format.md byte for byte.

The names below are the engine's public face; the modules hold the rest.
"""

from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.errors import (
    BodyTooLargeError,
    CorruptRecordError,
    DiskFullError,
    FlushFailedError,
    InvalidMessageIdError,
    InvalidOffsetError,
    InvalidQueueIdError,
    InvalidTopicError,
    PropertiesTooLargeError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    UnknownTopicError,
)
from raftlog.store.filesystem import FileSystem, OsFileSystem
from raftlog.store.message_store import GetResult, Message, MessageStore, PutResult
from raftlog.store.record import MessageRecord
from raftlog.store.retention import RetentionReport
from raftlog.store.topic_config import TopicConfig
from raftlog.store.validation import Limits

__all__ = [
    "BodyTooLargeError",
    "CorruptRecordError",
    "DiskFullError",
    "FileSystem",
    "FlushFailedError",
    "FlushMode",
    "GetResult",
    "InvalidMessageIdError",
    "InvalidOffsetError",
    "InvalidQueueIdError",
    "InvalidTopicError",
    "Limits",
    "Message",
    "MessageRecord",
    "MessageStore",
    "OsFileSystem",
    "PropertiesTooLargeError",
    "PutResult",
    "RetentionReport",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreLockedError",
    "TopicConfig",
    "UnknownTopicError",
]
