"""When and how often the client retries: bounded, jittered, and only what is safe.

Rules this module keeps:
- Every retry loop stops after ``max_attempts`` attempts or ``total_timeout_s`` seconds,
  whichever comes first; waits are exponential with full jitter (tenacity's
  ``wait_random_exponential``) so many clients do not retry in step.
- Retried: not-leader answers (nothing was written), UNAVAILABLE (no leader, or no
  connection), RESOURCE_EXHAUSTED from the server (back off). Never retried: invalid
  arguments, not found, sequence errors, internal errors.
- An unknown outcome is retried ONLY for an idempotent write (same producer_id + sequence:
  the server stores it at most once); otherwise it is surfaced as UnknownOutcomeError.
- Once any attempt of a write had an unknown outcome, a later "nothing written" failure does
  not make the whole operation a failure: it is still surfaced as UnknownOutcomeError.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from raftlog.client.errors import (
    DeadlineExceededError,
    NotLeaderError,
    RaftlogError,
    ResourceExhaustedError,
    UnavailableError,
    UnknownOutcomeError,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds of one retried operation. ``attempt_timeout_s`` caps each attempt (one RPC
    routed over the members); every attempt also ends by the total deadline."""

    max_attempts: int = 10
    total_timeout_s: float = 30.0
    attempt_timeout_s: float = 10.0
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts is {self.max_attempts}; it must be at least 1")
        for name in ("total_timeout_s", "attempt_timeout_s", "initial_backoff_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} is {getattr(self, name)}; it must be positive")
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError("max_backoff_s must be at least initial_backoff_s")

    def should_retry(self, error: BaseException, *, idempotent: bool) -> bool:
        """Whether retrying after ``error`` is safe and may help. ``idempotent`` says the
        operation may be repeated without effect (an idempotent produce, or a read)."""
        if isinstance(error, UnknownOutcomeError):
            return idempotent
        if isinstance(error, DeadlineExceededError):
            return True  # a read: nothing changed
        if isinstance(error, ResourceExhaustedError):
            return error.retryable
        return isinstance(error, NotLeaderError | UnavailableError)

    def run(self, operation: Callable[[float], T], *, idempotent: bool) -> T:
        """Run ``operation(timeout_s)`` until it succeeds, fails for good or the bounds are
        reached; re-raise the last error (see the module rules for unknown outcomes).
        ``timeout_s`` is the time the attempt may take (capped by the total deadline)."""
        deadline = time.monotonic() + self.total_timeout_s
        saw_unknown: list[UnknownOutcomeError] = []

        def attempt() -> T:
            remaining_s = deadline - time.monotonic()
            try:
                return operation(max(0.001, min(self.attempt_timeout_s, remaining_s)))
            except UnknownOutcomeError as error:
                saw_unknown.append(error)
                raise

        jitter = tenacity.wait_random_exponential(
            multiplier=self.initial_backoff_s, max=self.max_backoff_s
        )

        def wait_s(state: tenacity.RetryCallState) -> float:
            # Never sleep past the total deadline.
            return min(jitter(state), max(0.0, deadline - time.monotonic()))

        retrying = tenacity.Retrying(
            stop=(
                tenacity.stop_after_attempt(self.max_attempts)
                | tenacity.stop_after_delay(self.total_timeout_s)
            ),
            wait=wait_s,
            retry=tenacity.retry_if_exception(
                lambda error: self.should_retry(error, idempotent=idempotent)
            ),
            reraise=True,
        )
        try:
            return retrying(attempt)
        except RaftlogError as error:
            if (
                saw_unknown
                and not isinstance(error, UnknownOutcomeError)
                and self.should_retry(error, idempotent=idempotent)
            ):
                raise UnknownOutcomeError(
                    f"an earlier attempt's outcome is unknown and the last attempt "
                    f"failed ({error}); the write may or may not be stored",
                    code=error.code,
                    address=error.address,
                ) from error
            raise


DEFAULT_POLICY = RetryPolicy()
