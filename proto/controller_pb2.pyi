# mypy: ignore-errors
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HeartbeatRequest(_message.Message):
    __slots__ = ("broker_name", "node_id", "address", "max_offset", "epoch")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    node_id: str
    address: str
    max_offset: int
    epoch: int
    def __init__(self, broker_name: _Optional[str] = ..., node_id: _Optional[str] = ..., address: _Optional[str] = ..., max_offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class GroupView(_message.Message):
    __slots__ = ("broker_name", "master_id", "master_address", "master_epoch", "in_sync", "members", "alive")
    class MembersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    master_id: str
    master_address: str
    master_epoch: int
    in_sync: _containers.RepeatedScalarFieldContainer[str]
    members: _containers.ScalarMap[str, str]
    alive: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_name: _Optional[str] = ..., master_id: _Optional[str] = ..., master_address: _Optional[str] = ..., master_epoch: _Optional[int] = ..., in_sync: _Optional[_Iterable[str]] = ..., members: _Optional[_Mapping[str, str]] = ..., alive: _Optional[_Iterable[str]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("group", "lease_ms")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    group: GroupView
    lease_ms: int
    def __init__(self, group: _Optional[_Union[GroupView, _Mapping]] = ..., lease_ms: _Optional[int] = ...) -> None: ...

class AlterInSyncRequest(_message.Message):
    __slots__ = ("broker_name", "master_id", "master_epoch", "in_sync")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MASTER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    master_id: str
    master_epoch: int
    in_sync: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_name: _Optional[str] = ..., master_id: _Optional[str] = ..., master_epoch: _Optional[int] = ..., in_sync: _Optional[_Iterable[str]] = ...) -> None: ...

class GetGroupRequest(_message.Message):
    __slots__ = ("broker_name",)
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    def __init__(self, broker_name: _Optional[str] = ...) -> None: ...
