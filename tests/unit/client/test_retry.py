"""RetryPolicy: which errors are retried, the bounds, and unknown outcomes."""

from __future__ import annotations

import time

import pytest

from raftlog.client import errors as e
from raftlog.client.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=4, total_timeout_s=5.0, initial_backoff_s=0.001, max_backoff_s=0.01)


@pytest.mark.parametrize(
    ("error", "idempotent", "retried"),
    [
        (e.NotLeaderError("x", leader_address="h:1"), False, True),
        (e.NotLeaderError("x", leader_address=None), False, True),
        (e.UnavailableError("x"), False, True),
        (e.ResourceExhaustedError("x"), False, True),
        (e.ResourceExhaustedError("x", retryable=False), True, False),
        (e.UnknownOutcomeError("x"), False, False),
        (e.UnknownOutcomeError("x"), True, True),
        (e.DeadlineExceededError("x"), False, True),
        (e.InvalidArgumentError("x"), True, False),
        (e.NotFoundError("x"), True, False),
        (e.SequenceGapError("x"), True, False),
        (e.SequenceForgottenError("x"), True, False),
        (e.InternalError("x"), True, False),
    ],
)
def test_should_retry(error: e.RaftlogError, idempotent: bool, retried: bool) -> None:
    assert FAST.should_retry(error, idempotent=idempotent) is retried


def failing(errors: list[e.RaftlogError], result: str = "ok") -> tuple[list[float], object]:
    calls: list[float] = []

    def operation(timeout_s: float) -> str:
        calls.append(timeout_s)
        if errors:
            raise errors.pop(0)
        return result

    return calls, operation


def test_retries_until_success() -> None:
    calls, operation = failing(
        [e.UnavailableError("a"), e.NotLeaderError("b", leader_address=None)]
    )
    assert FAST.run(operation, idempotent=False) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 3


def test_stops_after_max_attempts() -> None:
    calls, operation = failing([e.UnavailableError(str(i)) for i in range(10)])
    with pytest.raises(e.UnavailableError, match="3"):
        FAST.run(operation, idempotent=False)  # type: ignore[arg-type]
    assert len(calls) == 4


def test_stops_at_total_deadline() -> None:
    policy = RetryPolicy(
        max_attempts=1000, total_timeout_s=0.3, initial_backoff_s=0.05, max_backoff_s=0.05
    )
    calls, operation = failing([e.UnavailableError("x") for _ in range(1000)])
    started = time.monotonic()
    with pytest.raises(e.UnavailableError):
        policy.run(operation, idempotent=False)  # type: ignore[arg-type]
    assert time.monotonic() - started < 1.0
    assert 2 <= len(calls) < 50
    assert all(timeout <= 0.3 for timeout in calls)


def test_unknown_outcome_not_retried_unless_idempotent() -> None:
    calls, operation = failing([e.UnknownOutcomeError("lost")])
    with pytest.raises(e.UnknownOutcomeError):
        FAST.run(operation, idempotent=False)  # type: ignore[arg-type]
    assert len(calls) == 1
    calls, operation = failing([e.UnknownOutcomeError("lost")])
    assert FAST.run(operation, idempotent=True) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 2


def test_unknown_then_unavailable_stays_unknown() -> None:
    _, operation = failing([e.UnknownOutcomeError("lost")] + [e.UnavailableError("x")] * 5)
    with pytest.raises(e.UnknownOutcomeError, match="earlier attempt"):
        FAST.run(operation, idempotent=True)  # type: ignore[arg-type]


def test_definite_errors_are_not_retried() -> None:
    calls, operation = failing([e.InvalidArgumentError("bad")])
    with pytest.raises(e.InvalidArgumentError):
        FAST.run(operation, idempotent=True)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="total_timeout_s"):
        RetryPolicy(total_timeout_s=0)
