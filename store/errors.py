"""Every error the store raises on purpose, one type per cause.

Rules this module keeps:
- Operating errors (bad input, full disk, a locked directory, a corrupt byte) are subclasses of
  ``StoreError`` and carry a message that says what was wrong and what the limit is; the layers
  above map each type to one gRPC status or CLI message.
- A validation error is raised before anything is written.
- Programmer errors (a broken invariant) are ``AssertionError``s, not ``StoreError``s.
"""


class StoreError(Exception):
    """Base of every deliberate store error."""


class InvalidTopicError(StoreError):
    """Topic name empty, longer than the limit, or with characters outside ``[%|a-zA-Z0-9_-]``."""


class UnknownTopicError(StoreError):
    """The topic was never created."""


class InvalidQueueIdError(StoreError):
    """Queue id negative or not below the topic's queue count."""


class BodyTooLargeError(StoreError):
    """Message body longer than the configured maximum (default 4 MiB)."""


class PropertiesTooLargeError(StoreError):
    """Encoded properties longer than 32767 bytes, or a key/value holding a separator byte."""


class InvalidArgumentError(StoreError):
    """A message field or call argument outside what the record format or the call accepts: a
    field of the wrong type or beyond its bytes (flag, timestamps, ports, counts), keys given
    as one string, an empty consumer group, an empty key or an inverted time window."""


class InvalidOffsetError(StoreError):
    """A negative or otherwise impossible queue or physical offset."""


class InvalidMessageIdError(StoreError):
    """An offset message id that is not 32 hex digits, or points at no stored record."""


class DiskFullError(StoreError):
    """Disk use is above the full watermark; writes resume once retention frees space."""


class StoreLockedError(StoreError):
    """Another process holds the store directory's lock."""


class StoreClosedError(StoreError):
    """The store is shut down (or shutting down) and takes no more writes."""


class CorruptRecordError(StoreError):
    """Bytes at a position do not form a valid record (bad magic, size or CRC)."""


class FlushFailedError(StoreError):
    """An fsync failed: bytes past the flushed offset may be lost. The CommitLog acknowledges
    nothing more until the store is reopened and recovered."""
