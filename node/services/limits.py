"""The client services' limits and defaults, in one place (``ServiceLimits``).

Rules this module keeps:
- Every limit the client API applies on the server side lives here, with its unit in its name;
  servicers read them from the one ``ServiceLimits`` they are built with, never from constants.
- Request fields that are "0 = the server's default" (client.proto Conventions) resolve through
  ``server_default``: 0 gives the default, anything above the cap gives the cap.
- A call never waits past its own deadline: ``timeout_for_call`` bounds a wait by what is left
  of the call's deadline and by the configured cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from raftlog.store.validation import Limits

MIB = 1024 * 1024


class DeadlinePassedError(Exception):
    """The call's deadline passed before the request could be started (nothing was done)."""


@dataclass(frozen=True, slots=True)
class ServiceLimits:
    """Caps and defaults of the client-facing gRPC services."""

    # A write (Produce, CommitOffsets, CreateTopic) or linearizable read (FetchOffsets) waits at
    # most this long for its outcome, even when the call's deadline is later.
    max_write_timeout_s: float = 10.0
    # A leadership transfer takes an election or two: longer than a write.
    max_transfer_timeout_s: float = 30.0
    # Pull's long polling waits at most this long (client.proto: "The server caps it").
    max_long_poll_ms: int = 30_000
    # A long poll wakes at least this often to notice a stopping server or a cancelled call
    # (wait_visible only wakes on new messages).
    long_poll_slice_ms: int = 250
    # A long poll answers this long before the call's deadline, so the answer arrives in time.
    long_poll_deadline_margin_ms: int = 100
    default_pull_messages: int = 32
    max_pull_messages: int = 1024
    default_pull_bytes: int = 4 * MIB
    # Below the 64 MiB receive limit client.proto asks clients to set (a body may be 4 MiB).
    max_pull_bytes: int = 32 * MIB
    # With several tags in a Pull filter, at most this many units are scanned per call (the
    # store's own bound for one tag is the same), so a sparse tag cannot make one call long.
    max_pull_units_scanned: int = 16384
    default_query_messages: int = 32
    max_query_messages: int = 1024
    # QueryByKey stops adding messages past this many record bytes (at least one is returned),
    # so 1024 large messages cannot make an answer over the clients' receive limit.
    max_query_bytes: int = 32 * MIB
    # client.proto ProduceRequest.producer_id: "at most 64 bytes".
    max_producer_id_bytes: int = 64
    # Topic name rules (length, characters): the same Limits the store is configured with.
    message_limits: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        for limit in fields(self):
            value = getattr(self, limit.name)
            if isinstance(value, int | float) and value <= 0:
                raise ValueError(f"ServiceLimits.{limit.name} must be positive, got {value}")
        for default_name, cap_name in (
            ("default_pull_messages", "max_pull_messages"),
            ("default_pull_bytes", "max_pull_bytes"),
            ("default_query_messages", "max_query_messages"),
        ):
            if getattr(self, default_name) > getattr(self, cap_name):
                raise ValueError(
                    f"ServiceLimits.{default_name} {getattr(self, default_name)} is above "
                    f"{cap_name} {getattr(self, cap_name)}"
                )


def server_default(requested: int, default: int, cap: int) -> int:
    """A request's "0 = server default" field: 0 gives ``default``, else at most ``cap``."""
    if requested <= 0:
        return default
    return min(requested, cap)


def timeout_for_call(time_remaining_s: float | None, cap_s: float) -> float:
    """How long a call may wait: what is left of its deadline (None: no deadline), at most
    ``cap_s``. Raises DeadlinePassedError when nothing is left, before anything is started."""
    if time_remaining_s is None:
        return cap_s
    if time_remaining_s <= 0:
        raise DeadlinePassedError("the call's deadline passed before the request was started")
    return min(time_remaining_s, cap_s)
