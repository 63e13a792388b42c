"""`raftlog transaction`: bad or missing arguments exit 2 before anything is sent."""

from __future__ import annotations

import argparse

import pytest

from raftlog.cli import main
from raftlog.cli import transaction as cli_transaction
from raftlog.store.message_id import encode_message_id

MSG_ID = encode_message_id(("127.0.0.1", 7701), 4096)
GOOD = ("--group", "orders-service", "--topic", "orders", "--id", "ABC123", "--msg-id", MSG_ID)


@pytest.fixture(autouse=True)
def no_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(args: argparse.Namespace) -> None:
        raise AssertionError("a usage error must be found before connecting")

    monkeypatch.setattr(cli_transaction, "connect", refuse)


def replaced(flag: str, value: str) -> tuple[str, ...]:
    argv = list(GOOD)
    argv[argv.index(flag) + 1] = value
    return tuple(argv)


def without(flag: str) -> tuple[str, ...]:
    argv = list(GOOD)
    index = argv.index(flag)
    del argv[index : index + 2]
    return tuple(argv)


@pytest.mark.parametrize("action", ["commit", "rollback"])
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (without("--group"), "required: --group"),
        (without("--topic"), "required: --topic"),
        (without("--id"), "required: --id"),
        (without("--msg-id"), "required: --msg-id"),
        (replaced("--group", ""), "--group must be non-empty"),
        (replaced("--topic", "two words"), "--topic must be non-empty"),
        (replaced("--id", ""), "--id must be non-empty"),
        (replaced("--msg-id", "not-hex"), "--msg-id: message id must be"),
        (replaced("--msg-id", MSG_ID[:-2]), "--msg-id: message id must be"),
    ],
)
def test_bad_end_arguments_exit_2(
    capsys: pytest.CaptureFixture[str], action: str, arguments: tuple[str, ...], message: str
) -> None:
    code = main(["transaction", action, *arguments])
    assert code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("transaction",), "required: transaction_command"),
        (("transaction", "decide", *GOOD), "invalid choice"),
        (("transaction", "list", "--limit", "3"), "unrecognized arguments"),
        (("transaction", "commit", *GOOD, "--timeout-s", "0"), "--timeout-s must be positive"),
    ],
)
def test_other_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from raftlog.cli import common

    monkeypatch.setattr(cli_transaction, "connect", common.connect)
    code = main(list(argv))
    assert code == 2
    assert message in capsys.readouterr().err


def test_produce_transaction_with_a_delay_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from raftlog.cli import client as cli_client

    argv = ["produce", "t", "body", "--transaction", "commit", "--delay-level", "2"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_client, "connect", no_connection_allowed)
        assert main(argv) == 2
    assert "cannot have a delay" in capsys.readouterr().err
    assert main(["produce", "t", "body", "--transaction", "maybe"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def no_connection_allowed(args: argparse.Namespace) -> None:
    raise AssertionError("a usage error must be found before connecting")
