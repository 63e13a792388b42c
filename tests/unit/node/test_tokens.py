"""The tokens file of auth_tokens_file: names and tokens read, comments skipped, and every
malformed line refused naming the file and line, never echoing a token."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.node.config import ConfigError
from raftlog.node.security.tokens import load_tokens


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
