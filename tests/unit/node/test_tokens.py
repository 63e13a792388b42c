"""The tokens file of auth_tokens_file: names and tokens read, comments skipped, and every
malformed line refused naming the file and line, never echoing a token; the file read again
when it changes (at most once a second), a bad new version kept out with one warning line; and
the interceptor admitting a known bearer token only, comparing every token."""

from __future__ import annotations

import hmac
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from raftlog.node.config import ConfigError
from raftlog.node.security.tokens import (
    RELOAD_CHECK_INTERVAL_S,
    TokenCheck,
    TokenFile,
    load_tokens,
)


def test_clients_are_read_with_comments_and_blanks_skipped(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(
        "# two clients\n\norders: orders-0123456789abcdef\naudit:audit-fedcba9876543210\n"
    )
    assert load_tokens(str(path)) == {
        "orders": "orders-0123456789abcdef",
        "audit": "audit-fedcba9876543210",
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("orders-0123456789abcdef\n", "expected name:token"),
        ("orders:tooshort\n", "shorter than 16"),
        ("a:0123456789abcdef0\na:fedcba9876543210f\n", "listed twice"),
        ("# nobody\n", "lists no client"),
    ],
)
def test_a_malformed_file_is_refused_in_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_tokens(str(path))
    assert says in str(refused.value) and "auth_tokens_file" in str(refused.value)
    assert "tooshort" not in str(refused.value)


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_tokens(str(tmp_path / "missing"))


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def write_atomically(path: Path, text: str | bytes) -> None:
    """As an operator should: a temporary file in the same directory, then os.replace."""
    temporary = path.with_name(path.name + ".tmp")
    if isinstance(text, bytes):
        temporary.write_bytes(text)
    else:
        temporary.write_text(text)
    os.replace(temporary, path)


ORDERS = "orders:orders-0123456789abcdef\n"
AUDIT = "audit:audit-fedcba9876543210\n"


@pytest.fixture
def token_file(tmp_path: Path) -> tuple[Path, TokenFile, FakeClock]:
    path = tmp_path / "tokens"
    path.write_text(ORDERS)
    clock = FakeClock()
    return path, TokenFile(str(path), clock=clock), clock


def names(tokens: TokenFile) -> set[str]:
    return {name for name, _ in tokens.clients()}


def test_a_changed_file_is_read_again_after_the_check_interval(
    token_file: tuple[Path, TokenFile, FakeClock],
) -> None:
    path, tokens, clock = token_file
    write_atomically(path, ORDERS + AUDIT)
    clock.now_s += RELOAD_CHECK_INTERVAL_S / 2
    assert names(tokens) == {"orders"}  # not looked at yet: at most one check a second
    clock.now_s += RELOAD_CHECK_INTERVAL_S / 2
    assert names(tokens) == {"orders", "audit"}
    write_atomically(path, AUDIT)
    clock.now_s += RELOAD_CHECK_INTERVAL_S
    assert names(tokens) == {"audit"}  # orders' line removed: revoked


def test_the_file_is_looked_at_at_most_once_per_interval(
    token_file: tuple[Path, TokenFile, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, tokens, clock = token_file
    looked: list[str] = []
    real_stat = os.stat

    def counting_stat(path: str) -> os.stat_result:
        looked.append(path)
        return real_stat(path)

    monkeypatch.setattr(os, "stat", counting_stat)
    for _ in range(100):
        tokens.clients()
    assert looked == []
    clock.now_s += RELOAD_CHECK_INTERVAL_S
    for _ in range(100):
        tokens.clients()
    assert len(looked) == 1


def test_an_in_place_rewrite_of_the_same_size_is_seen(
    token_file: tuple[Path, TokenFile, FakeClock],
) -> None:
    """Not atomic, same length, same inode: the modification time tells."""
    path, tokens, clock = token_file
    before = path.stat()
    path.write_text(ORDERS.replace("orders-0", "orders-1"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    clock.now_s += RELOAD_CHECK_INTERVAL_S
    assert dict(tokens.clients()) == {"orders": b"orders-1123456789abcdef"}


@pytest.mark.parametrize(
    "bad",
    [
        b"orders:tooshort-secret\nx\n",
        b"nobody-but-a-comment-secret-value\n",
        b"orders:\xff\xfe-0123456789abcdef\n",
    ],
    ids=["malformed", "no-name", "not-utf8"],
)
def test_a_bad_rewrite_keeps_the_previous_tokens_with_one_warning(
    token_file: tuple[Path, TokenFile, FakeClock],
    caplog: pytest.LogCaptureFixture,
    bad: bytes,
) -> None:
    path, tokens, clock = token_file
    write_atomically(path, ORDERS + AUDIT)
    clock.now_s += RELOAD_CHECK_INTERVAL_S
    assert names(tokens) == {"orders", "audit"}
    caplog.set_level(logging.INFO, logger="raftlog.node.security.tokens")
    caplog.clear()
    write_atomically(path, bad)
    for _ in range(5):  # five checks of the same bad version: one warning
        clock.now_s += RELOAD_CHECK_INTERVAL_S
        assert names(tokens) == {"orders", "audit"}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    line = warnings[0].getMessage()
    assert "\n" not in line and "not reloaded" in line and "auth_tokens_file" in line
    for secret in ("tooshort-secret", "nobody-but-a-comment-secret-value", "0123456789abcdef"):
        assert secret not in line
    # A good version later is read again.
    write_atomically(path, AUDIT)
    clock.now_s += RELOAD_CHECK_INTERVAL_S
    assert names(tokens) == {"audit"}


def test_a_removed_file_keeps_the_previous_tokens_until_it_comes_back(
    token_file: tuple[Path, TokenFile, FakeClock], caplog: pytest.LogCaptureFixture
) -> None:
    path, tokens, clock = token_file
    caplog.set_level(logging.WARNING, logger="raftlog.node.security.tokens")
    path.unlink()
    for _ in range(3):
        clock.now_s += RELOAD_CHECK_INTERVAL_S
        assert names(tokens) == {"orders"}
    assert [r.getMessage() for r in caplog.records if "cannot read" in r.getMessage()] != []
    assert len(caplog.records) == 1
    write_atomically(path, AUDIT)
    clock.now_s += RELOAD_CHECK_INTERVAL_S
    assert names(tokens) == {"audit"}


def test_a_malformed_file_at_start_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("orders:short\n")
    with pytest.raises(ConfigError, match="line 1"):
        TokenFile(str(path))


@dataclass
class Details:
    method: str
    invocation_metadata: tuple[tuple[str, str], ...]


def handler() -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(lambda request, context: request)


@pytest.mark.parametrize(
    ("header", "admitted"),
    [
        ("Bearer orders-0123456789abcdef", True),
        ("bearer audit-fedcba9876543210", True),
        ("Bearer orders-0123456789abcdeX", False),
        ("Bearer orders-0123456789abcdef0", False),
        ("orders-0123456789abcdef", False),
        (None, False),
    ],
)
def test_the_check_admits_a_known_bearer_token_only(
    tmp_path: Path, header: str | None, admitted: bool
) -> None:
    path = tmp_path / "tokens"
    path.write_text(ORDERS + AUDIT)
    check = TokenCheck(TokenFile(str(path)))
    served = handler()
    metadata = () if header is None else (("authorization", header),)
    got = check.intercept_service(lambda _: served, Details("/raftlog.v1.Admin/X", metadata))
    assert (got is served) is admitted
    # Health stays open without a token.
    health = check.intercept_service(lambda _: served, Details("/grpc.health.v1.Health/Check", ()))
    assert health is served


def test_the_check_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(ORDERS)
    clock = FakeClock()
    check = TokenCheck(TokenFile(str(path), clock=clock))
    assert check.client_of("orders-0123456789abcdef") == "orders"
    assert check.client_of("audit-fedcba9876543210") is None
    write_atomically(path, AUDIT)
    clock.now_s += RELOAD_CHECK_INTERVAL_S
    assert check.client_of("orders-0123456789abcdef") is None
    assert check.client_of("audit-fedcba9876543210") == "audit"


def test_every_token_is_compared_whichever_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison does not stop at the first match (timing tells nothing about which)."""
    path = tmp_path / "tokens"
    path.write_text("".join(f"c{i}:token-{i:02d}-0123456789abcdef\n" for i in range(5)))
    check = TokenCheck(TokenFile(str(path)))
    compared: list[bytes] = []
    real = hmac.compare_digest

    def counting(given: bytes, known: bytes) -> bool:
        compared.append(known)
        return real(given, known)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    for presented in ("token-00-0123456789abcdef", "token-04-0123456789abcdef", "nope"):
        compared.clear()
        check.client_of(presented)
        assert len(compared) == 5
