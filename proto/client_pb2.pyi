# mypy: ignore-errors
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TransactionResolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSACTION_RESOLUTION_UNSPECIFIED: _ClassVar[TransactionResolution]
    TRANSACTION_RESOLUTION_COMMIT: _ClassVar[TransactionResolution]
    TRANSACTION_RESOLUTION_ROLLBACK: _ClassVar[TransactionResolution]

class SendStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEND_STATUS_OK: _ClassVar[SendStatus]
    SEND_STATUS_FLUSH_SLAVE_TIMEOUT: _ClassVar[SendStatus]
    SEND_STATUS_SLAVE_NOT_AVAILABLE: _ClassVar[SendStatus]

class PullStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PULL_STATUS_UNSPECIFIED: _ClassVar[PullStatus]
    PULL_STATUS_FOUND: _ClassVar[PullStatus]
    PULL_STATUS_NO_NEW_MESSAGES: _ClassVar[PullStatus]
    PULL_STATUS_NO_MATCHED_MESSAGES: _ClassVar[PullStatus]
    PULL_STATUS_OFFSET_TOO_SMALL: _ClassVar[PullStatus]
    PULL_STATUS_OFFSET_TOO_LARGE: _ClassVar[PullStatus]

class MemberRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMBER_ROLE_UNSPECIFIED: _ClassVar[MemberRole]
    MEMBER_ROLE_UNKNOWN: _ClassVar[MemberRole]
    MEMBER_ROLE_FOLLOWER: _ClassVar[MemberRole]
    MEMBER_ROLE_PRE_CANDIDATE: _ClassVar[MemberRole]
    MEMBER_ROLE_CANDIDATE: _ClassVar[MemberRole]
    MEMBER_ROLE_LEADER: _ClassVar[MemberRole]
    MEMBER_ROLE_LEARNER: _ClassVar[MemberRole]

class ReplicationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICATION_STATE_UNSPECIFIED: _ClassVar[ReplicationState]
    REPLICATION_STATE_PROBE: _ClassVar[ReplicationState]
    REPLICATION_STATE_REPLICATE: _ClassVar[ReplicationState]
    REPLICATION_STATE_SNAPSHOT: _ClassVar[ReplicationState]
TRANSACTION_RESOLUTION_UNSPECIFIED: TransactionResolution
TRANSACTION_RESOLUTION_COMMIT: TransactionResolution
TRANSACTION_RESOLUTION_ROLLBACK: TransactionResolution
SEND_STATUS_OK: SendStatus
SEND_STATUS_FLUSH_SLAVE_TIMEOUT: SendStatus
SEND_STATUS_SLAVE_NOT_AVAILABLE: SendStatus
PULL_STATUS_UNSPECIFIED: PullStatus
PULL_STATUS_FOUND: PullStatus
PULL_STATUS_NO_NEW_MESSAGES: PullStatus
PULL_STATUS_NO_MATCHED_MESSAGES: PullStatus
PULL_STATUS_OFFSET_TOO_SMALL: PullStatus
PULL_STATUS_OFFSET_TOO_LARGE: PullStatus
MEMBER_ROLE_UNSPECIFIED: MemberRole
MEMBER_ROLE_UNKNOWN: MemberRole
MEMBER_ROLE_FOLLOWER: MemberRole
MEMBER_ROLE_PRE_CANDIDATE: MemberRole
MEMBER_ROLE_CANDIDATE: MemberRole
MEMBER_ROLE_LEADER: MemberRole
MEMBER_ROLE_LEARNER: MemberRole
REPLICATION_STATE_UNSPECIFIED: ReplicationState
REPLICATION_STATE_PROBE: ReplicationState
REPLICATION_STATE_REPLICATE: ReplicationState
REPLICATION_STATE_SNAPSHOT: ReplicationState

class HostPort(_message.Message):
    __slots__ = ("ip", "port")
    IP_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ip: str
    port: int
    def __init__(self, ip: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class Property(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class StoredMessage(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset", "physical_offset", "msg_id", "born_timestamp_ms", "store_timestamp_ms", "born_host", "store_host", "flag", "sys_flag", "reconsume_times", "keys", "tags", "uniq_key", "properties", "body", "prepared_transaction_offset", "store_size_bytes", "body_crc")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    STORE_HOST_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    UNIQ_KEY_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    PREPARED_TRANSACTION_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STORE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    BODY_CRC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    msg_id: str
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: HostPort
    store_host: HostPort
    flag: int
    sys_flag: int
    reconsume_times: int
    keys: _containers.RepeatedScalarFieldContainer[str]
    tags: str
    uniq_key: str
    properties: _containers.RepeatedCompositeFieldContainer[Property]
    body: bytes
    prepared_transaction_offset: int
    store_size_bytes: int
    body_crc: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., physical_offset: _Optional[int] = ..., msg_id: _Optional[str] = ..., born_timestamp_ms: _Optional[int] = ..., store_timestamp_ms: _Optional[int] = ..., born_host: _Optional[_Union[HostPort, _Mapping]] = ..., store_host: _Optional[_Union[HostPort, _Mapping]] = ..., flag: _Optional[int] = ..., sys_flag: _Optional[int] = ..., reconsume_times: _Optional[int] = ..., keys: _Optional[_Iterable[str]] = ..., tags: _Optional[str] = ..., uniq_key: _Optional[str] = ..., properties: _Optional[_Iterable[_Union[Property, _Mapping]]] = ..., body: _Optional[bytes] = ..., prepared_transaction_offset: _Optional[int] = ..., store_size_bytes: _Optional[int] = ..., body_crc: _Optional[int] = ...) -> None: ...

class ProduceMessage(_message.Message):
    __slots__ = ("queue_id", "sharding_key", "keys", "tags", "uniq_key", "properties", "body", "flag", "born_timestamp_ms", "sys_flag", "reconsume_times")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    SHARDING_KEY_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    UNIQ_KEY_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    sharding_key: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    tags: str
    uniq_key: str
    properties: _containers.RepeatedCompositeFieldContainer[Property]
    body: bytes
    flag: int
    born_timestamp_ms: int
    sys_flag: int
    reconsume_times: int
    def __init__(self, queue_id: _Optional[int] = ..., sharding_key: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., tags: _Optional[str] = ..., uniq_key: _Optional[str] = ..., properties: _Optional[_Iterable[_Union[Property, _Mapping]]] = ..., body: _Optional[bytes] = ..., flag: _Optional[int] = ..., born_timestamp_ms: _Optional[int] = ..., sys_flag: _Optional[int] = ..., reconsume_times: _Optional[int] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("topic", "messages", "records", "producer_id", "sequence", "delay_level", "deliver_at_ms", "transaction_group")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    DELAY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_GROUP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    messages: _containers.RepeatedCompositeFieldContainer[ProduceMessage]
    records: bytes
    producer_id: str
    sequence: int
    delay_level: int
    deliver_at_ms: int
    transaction_group: str
    def __init__(self, topic: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ProduceMessage, _Mapping]]] = ..., records: _Optional[bytes] = ..., producer_id: _Optional[str] = ..., sequence: _Optional[int] = ..., delay_level: _Optional[int] = ..., deliver_at_ms: _Optional[int] = ..., transaction_group: _Optional[str] = ...) -> None: ...

class ProduceResult(_message.Message):
    __slots__ = ("queue_id", "queue_offset", "physical_offset", "msg_id", "transaction_queue_id")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    queue_offset: int
    physical_offset: int
    msg_id: str
    transaction_queue_id: int
    def __init__(self, queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., physical_offset: _Optional[int] = ..., msg_id: _Optional[str] = ..., transaction_queue_id: _Optional[int] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("results", "store_timestamp_ms", "duplicate", "raft_index", "raft_term", "send_status")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    RAFT_INDEX_FIELD_NUMBER: _ClassVar[int]
    RAFT_TERM_FIELD_NUMBER: _ClassVar[int]
    SEND_STATUS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ProduceResult]
    store_timestamp_ms: int
    duplicate: bool
    raft_index: int
    raft_term: int
    send_status: SendStatus
    def __init__(self, results: _Optional[_Iterable[_Union[ProduceResult, _Mapping]]] = ..., store_timestamp_ms: _Optional[int] = ..., duplicate: _Optional[bool] = ..., raft_index: _Optional[int] = ..., raft_term: _Optional[int] = ..., send_status: _Optional[_Union[SendStatus, str]] = ...) -> None: ...

class EndTransactionRequest(_message.Message):
    __slots__ = ("producer_group", "topic", "transaction_id", "msg_id", "resolution", "from_check")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    FROM_CHECK_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    topic: str
    transaction_id: str
    msg_id: str
    resolution: TransactionResolution
    from_check: bool
    def __init__(self, producer_group: _Optional[str] = ..., topic: _Optional[str] = ..., transaction_id: _Optional[str] = ..., msg_id: _Optional[str] = ..., resolution: _Optional[_Union[TransactionResolution, str]] = ..., from_check: _Optional[bool] = ...) -> None: ...

class EndTransactionResponse(_message.Message):
    __slots__ = ("resolution", "duplicate", "result")
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    resolution: TransactionResolution
    duplicate: bool
    result: ProduceResult
    def __init__(self, resolution: _Optional[_Union[TransactionResolution, str]] = ..., duplicate: _Optional[bool] = ..., result: _Optional[_Union[ProduceResult, _Mapping]] = ...) -> None: ...

class TransactionChecksRequest(_message.Message):
    __slots__ = ("producer_group", "client_id", "topics")
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    producer_group: str
    client_id: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, producer_group: _Optional[str] = ..., client_id: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class TransactionCheck(_message.Message):
    __slots__ = ("message", "transaction_id", "check_times")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_TIMES_FIELD_NUMBER: _ClassVar[int]
    message: StoredMessage
    transaction_id: str
    check_times: int
    def __init__(self, message: _Optional[_Union[StoredMessage, _Mapping]] = ..., transaction_id: _Optional[str] = ..., check_times: _Optional[int] = ...) -> None: ...

class ConsumerHeartbeatRequest(_message.Message):
    __slots__ = ("group", "client_id", "topics", "heartbeat_interval_ms", "leaving")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    group: str
    client_id: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    heartbeat_interval_ms: int
    leaving: bool
    def __init__(self, group: _Optional[str] = ..., client_id: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., heartbeat_interval_ms: _Optional[int] = ..., leaving: _Optional[bool] = ...) -> None: ...

class TopicMembers(_message.Message):
    __slots__ = ("topic", "client_ids")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CLIENT_IDS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    client_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topic: _Optional[str] = ..., client_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ConsumerHeartbeatResponse(_message.Message):
    __slots__ = ("members", "warming_up", "term")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    WARMING_UP_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[TopicMembers]
    warming_up: bool
    term: int
    def __init__(self, members: _Optional[_Iterable[_Union[TopicMembers, _Mapping]]] = ..., warming_up: _Optional[bool] = ..., term: _Optional[int] = ...) -> None: ...

class LockQueuesRequest(_message.Message):
    __slots__ = ("group", "client_id", "topic", "queue_ids")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    group: str
    client_id: str
    topic: str
    queue_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, group: _Optional[str] = ..., client_id: _Optional[str] = ..., topic: _Optional[str] = ..., queue_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class LockQueuesResponse(_message.Message):
    __slots__ = ("locked_queue_ids", "lease_ms", "retry_after_ms")
    LOCKED_QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    locked_queue_ids: _containers.RepeatedScalarFieldContainer[int]
    lease_ms: int
    retry_after_ms: int
    def __init__(self, locked_queue_ids: _Optional[_Iterable[int]] = ..., lease_ms: _Optional[int] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class UnlockQueuesRequest(_message.Message):
    __slots__ = ("group", "client_id", "topic", "queue_ids")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    group: str
    client_id: str
    topic: str
    queue_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, group: _Optional[str] = ..., client_id: _Optional[str] = ..., topic: _Optional[str] = ..., queue_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class UnlockQueuesResponse(_message.Message):
    __slots__ = ("unlocked_queue_ids",)
    UNLOCKED_QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    unlocked_queue_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, unlocked_queue_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class SendBackRequest(_message.Message):
    __slots__ = ("group", "topic", "msg_id", "max_reconsume_times", "delay_level", "producer_id", "sequence")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    DELAY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    msg_id: str
    max_reconsume_times: int
    delay_level: int
    producer_id: str
    sequence: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., msg_id: _Optional[str] = ..., max_reconsume_times: _Optional[int] = ..., delay_level: _Optional[int] = ..., producer_id: _Optional[str] = ..., sequence: _Optional[int] = ...) -> None: ...

class SendBackResponse(_message.Message):
    __slots__ = ("topic", "dead_lettered", "reconsume_times", "result", "duplicate")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    dead_lettered: bool
    reconsume_times: int
    result: ProduceResult
    duplicate: bool
    def __init__(self, topic: _Optional[str] = ..., dead_lettered: _Optional[bool] = ..., reconsume_times: _Optional[int] = ..., result: _Optional[_Union[ProduceResult, _Mapping]] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset", "max_messages", "max_bytes", "tags", "long_poll_timeout_ms", "consumer_group", "return_records", "this_replica")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    LONG_POLL_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    RETURN_RECORDS_FIELD_NUMBER: _ClassVar[int]
    THIS_REPLICA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    max_messages: int
    max_bytes: int
    tags: _containers.RepeatedScalarFieldContainer[str]
    long_poll_timeout_ms: int
    consumer_group: str
    return_records: bool
    this_replica: bool
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., max_messages: _Optional[int] = ..., max_bytes: _Optional[int] = ..., tags: _Optional[_Iterable[str]] = ..., long_poll_timeout_ms: _Optional[int] = ..., consumer_group: _Optional[str] = ..., return_records: _Optional[bool] = ..., this_replica: _Optional[bool] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("status", "messages", "next_queue_offset", "min_queue_offset", "max_queue_offset", "records", "record_count")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    status: PullStatus
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    next_queue_offset: int
    min_queue_offset: int
    max_queue_offset: int
    records: bytes
    record_count: int
    def __init__(self, status: _Optional[_Union[PullStatus, str]] = ..., messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ..., next_queue_offset: _Optional[int] = ..., min_queue_offset: _Optional[int] = ..., max_queue_offset: _Optional[int] = ..., records: _Optional[bytes] = ..., record_count: _Optional[int] = ...) -> None: ...

class QueryByKeyRequest(_message.Message):
    __slots__ = ("topic", "key", "begin_timestamp_ms", "end_timestamp_ms", "max_messages")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    begin_timestamp_ms: int
    end_timestamp_ms: int
    max_messages: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., begin_timestamp_ms: _Optional[int] = ..., end_timestamp_ms: _Optional[int] = ..., max_messages: _Optional[int] = ...) -> None: ...

class QueryByKeyResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ...) -> None: ...

class QueryOffsetByTimeRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class QueryOffsetByTimeResponse(_message.Message):
    __slots__ = ("queue_offset",)
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    queue_offset: int
    def __init__(self, queue_offset: _Optional[int] = ...) -> None: ...

class QueryByMessageIdRequest(_message.Message):
    __slots__ = ("msg_id",)
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    msg_id: str
    def __init__(self, msg_id: _Optional[str] = ...) -> None: ...

class QueryByMessageIdResponse(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: StoredMessage
    def __init__(self, message: _Optional[_Union[StoredMessage, _Mapping]] = ...) -> None: ...

class QueueOffset(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class CommitOffsetsRequest(_message.Message):
    __slots__ = ("group", "offsets")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    group: str
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    def __init__(self, group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ...) -> None: ...

class CommitOffsetsResponse(_message.Message):
    __slots__ = ("raft_index",)
    RAFT_INDEX_FIELD_NUMBER: _ClassVar[int]
    raft_index: int
    def __init__(self, raft_index: _Optional[int] = ...) -> None: ...

class QueueRef(_message.Message):
    __slots__ = ("topic", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class FetchOffsetsRequest(_message.Message):
    __slots__ = ("group", "queues")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    group: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueRef]
    def __init__(self, group: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ...) -> None: ...

class FetchedOffset(_message.Message):
    __slots__ = ("topic", "queue_id", "found", "queue_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    found: bool
    queue_offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., found: _Optional[bool] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class FetchOffsetsResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[FetchedOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[FetchedOffset, _Mapping]]] = ...) -> None: ...

class TopicInfo(_message.Message):
    __slots__ = ("name", "queue_count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue_count: int
    def __init__(self, name: _Optional[str] = ..., queue_count: _Optional[int] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("topic", "queue_count")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_COUNT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_count: int
    def __init__(self, topic: _Optional[str] = ..., queue_count: _Optional[int] = ...) -> None: ...

class CreateTopicResponse(_message.Message):
    __slots__ = ("topic", "created")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    topic: TopicInfo
    created: bool
    def __init__(self, topic: _Optional[_Union[TopicInfo, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicInfo]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicInfo, _Mapping]]] = ...) -> None: ...

class DescribeTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("queue_id", "min_queue_offset", "max_queue_offset", "last_store_timestamp_ms")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    min_queue_offset: int
    max_queue_offset: int
    last_store_timestamp_ms: int
    def __init__(self, queue_id: _Optional[int] = ..., min_queue_offset: _Optional[int] = ..., max_queue_offset: _Optional[int] = ..., last_store_timestamp_ms: _Optional[int] = ...) -> None: ...

class DescribeTopicResponse(_message.Message):
    __slots__ = ("topic", "queues")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    topic: TopicInfo
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, topic: _Optional[_Union[TopicInfo, _Mapping]] = ..., queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class ListMembersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListMembersResponse(_message.Message):
    __slots__ = ("cluster_id", "members", "leader_id", "leader_address")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    members: _containers.RepeatedCompositeFieldContainer[Member]
    leader_id: str
    leader_address: str
    def __init__(self, cluster_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., leader_id: _Optional[str] = ..., leader_address: _Optional[str] = ...) -> None: ...

class AddMemberRequest(_message.Message):
    __slots__ = ("node_id", "address", "cluster_id")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    cluster_id: str
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class PromoteMemberRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class RemoveMemberRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class MembershipChangeResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class ClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Member(_message.Message):
    __slots__ = ("node_id", "address", "role", "voter", "has_progress", "match_index", "lag_entries", "replication_state", "inflight_appends", "recent_active", "lag_bytes", "lag_ms", "in_sync", "metrics_url")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    HAS_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_STATE_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_APPENDS_FIELD_NUMBER: _ClassVar[int]
    RECENT_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAG_MS_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    METRICS_URL_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    role: MemberRole
    voter: bool
    has_progress: bool
    match_index: int
    lag_entries: int
    replication_state: ReplicationState
    inflight_appends: int
    recent_active: bool
    lag_bytes: int
    lag_ms: int
    in_sync: bool
    metrics_url: str
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., role: _Optional[_Union[MemberRole, str]] = ..., voter: _Optional[bool] = ..., has_progress: _Optional[bool] = ..., match_index: _Optional[int] = ..., lag_entries: _Optional[int] = ..., replication_state: _Optional[_Union[ReplicationState, str]] = ..., inflight_appends: _Optional[int] = ..., recent_active: _Optional[bool] = ..., lag_bytes: _Optional[int] = ..., lag_ms: _Optional[int] = ..., in_sync: _Optional[bool] = ..., metrics_url: _Optional[str] = ...) -> None: ...

class ClusterStatusResponse(_message.Message):
    __slots__ = ("cluster_id", "node_id", "role", "leader_id", "leader_address", "term", "commit_index", "applied_index", "last_index", "members", "transferring_to", "replication", "broker_name", "broker_role")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRING_TO_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ROLE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    node_id: str
    role: MemberRole
    leader_id: str
    leader_address: str
    term: int
    commit_index: int
    applied_index: int
    last_index: int
    members: _containers.RepeatedCompositeFieldContainer[Member]
    transferring_to: str
    replication: str
    broker_name: str
    broker_role: str
    def __init__(self, cluster_id: _Optional[str] = ..., node_id: _Optional[str] = ..., role: _Optional[_Union[MemberRole, str]] = ..., leader_id: _Optional[str] = ..., leader_address: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., last_index: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., transferring_to: _Optional[str] = ..., replication: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_role: _Optional[str] = ...) -> None: ...

class TransferLeadershipRequest(_message.Message):
    __slots__ = ("target_id",)
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    def __init__(self, target_id: _Optional[str] = ...) -> None: ...

class TransferLeadershipResponse(_message.Message):
    __slots__ = ("leader_id", "leader_address", "term")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    leader_id: str
    leader_address: str
    term: int
    def __init__(self, leader_id: _Optional[str] = ..., leader_address: _Optional[str] = ..., term: _Optional[int] = ...) -> None: ...

class AclRule(_message.Message):
    __slots__ = ("subject", "topic_pattern", "permissions")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PATTERN_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    subject: str
    topic_pattern: str
    permissions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, subject: _Optional[str] = ..., topic_pattern: _Optional[str] = ..., permissions: _Optional[_Iterable[str]] = ...) -> None: ...

class ChangeAclRequest(_message.Message):
    __slots__ = ("subject", "topic_pattern", "permissions", "revoke")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PATTERN_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    REVOKE_FIELD_NUMBER: _ClassVar[int]
    subject: str
    topic_pattern: str
    permissions: _containers.RepeatedScalarFieldContainer[str]
    revoke: bool
    def __init__(self, subject: _Optional[str] = ..., topic_pattern: _Optional[str] = ..., permissions: _Optional[_Iterable[str]] = ..., revoke: _Optional[bool] = ...) -> None: ...

class ChangeAclResponse(_message.Message):
    __slots__ = ("rules",)
    RULES_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[AclRule]
    def __init__(self, rules: _Optional[_Iterable[_Union[AclRule, _Mapping]]] = ...) -> None: ...

class ListAclsRequest(_message.Message):
    __slots__ = ("subject",)
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    subject: str
    def __init__(self, subject: _Optional[str] = ...) -> None: ...

class ListAclsResponse(_message.Message):
    __slots__ = ("rules",)
    RULES_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[AclRule]
    def __init__(self, rules: _Optional[_Iterable[_Union[AclRule, _Mapping]]] = ...) -> None: ...
