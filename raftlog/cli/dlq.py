"""`raftlog dlq list|show|resend GROUP`: a consumer group's dead-letter topic, ``%DLQ%<GROUP>``
(docs/messaging.md, "Retry and dead letters").

- ``list``: one line per dead letter (its offset in the dead-letter queue, message id, the
  topic it was first consumed from, retries, store time, a body preview), or ``--json``.
- ``show --offset N``: one dead letter in full (every field, every property, the body).
- ``resend``: a copy of each dead letter back to the topic it was first consumed from, as a
  first delivery (reconsume_times 0, RETRY_TOPIC dropped; body, keys, tags, unique key and
  the other properties kept). ``--offset N`` resends that one; without it, every dead letter
  past what an earlier ``resend`` of the group reached, which is then recorded as the
  offset of the consumer group ``<GROUP>-dlq-resend``, so running it again resends only
  what arrived since.

Rules this module keeps: like the other client commands, every command takes ``--servers``,
``--timeout-s``, the TLS flags and ``--token-file`` (common.connect) and exits 0 when done, 1
when the operation failed (a group without dead letters, an offset with none: the message
says so), 2 for a usage error, 3 for an unknown outcome (a resend that may be stored).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from raftlog.cli.common import EXIT_OK, UsageError, add_connection_flags, connect

if TYPE_CHECKING:  # the client is imported lazily: `raftlog --help` stays fast
    from raftlog.client import Connection, Message

_PAGE_MESSAGES = 256
_PREVIEW_CHARS = 40
_RESENT_DROPS = frozenset({"RETRY_TOPIC"})


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `dlq list|show|resend`."""
    dlq = commands.add_parser("dlq", help="list, show or resend a group's dead letters")
    dlq.set_defaults(handler=run)
    actions = dlq.add_subparsers(dest="dlq_command", required=True)
    listing = actions.add_parser("list", help="the group's dead letters, one line each")
    listing.add_argument("--json", action="store_true", help="a JSON list instead")
    listing.add_argument("--limit", type=int, default=1000, help="at most this many")
    show = actions.add_parser("show", help="one dead letter in full")
    show.add_argument("--offset", type=int, required=True, help="its dead-letter offset")
    resend = actions.add_parser("resend", help="send dead letters back to their topic")
    resend.add_argument("--offset", type=int, help="only this one (default: every new one)")
    for parser in (listing, show, resend):
        parser.add_argument("group", help="the consumer group")
        add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    """Dispatch one dlq command."""
    if getattr(args, "offset", None) is not None and args.offset < 0:
        raise UsageError("--offset must be >= 0")
    with connect(args) as connection:
        if args.dlq_command == "list":
            if args.limit < 1:
                raise UsageError("--limit must be at least 1")
            _print_list(_read(connection, args, 0, args.limit), as_json=args.json)
        elif args.dlq_command == "show":
            _print_one(_one(connection, args))
        elif args.offset is not None:
            _resend(connection, args, [_one(connection, args)])
        else:
            _resend_new(connection, args)
    return EXIT_OK


def _dlq_topic(args: argparse.Namespace) -> str:
    return f"%DLQ%{args.group}"


def _read(
    connection: Connection, args: argparse.Namespace, first: int, limit: int
) -> list[Message]:
    """Up to ``limit`` dead letters from offset ``first`` (NotFoundError: no dead letters)."""
    from raftlog.client import Message
    from raftlog.proto import client_pb2

    found: list[Message] = []
    offset = first
    for _ in range(limit // _PAGE_MESSAGES + 2):  # bounded: each page moves on or ends
        response = connection.call(
            "Consumer",
            "Pull",
            client_pb2.PullRequest(
                topic=_dlq_topic(args),
                queue_id=0,
                queue_offset=offset,
                max_messages=min(_PAGE_MESSAGES, limit - len(found)),
            ),
            timeout_s=args.timeout_s,
            leader_only=False,
            write=False,
        )
        if response.status == client_pb2.PULL_STATUS_OFFSET_TOO_SMALL:
            offset = response.next_queue_offset
            continue
        found += [Message.from_proto(m) for m in response.messages]
        offset = response.next_queue_offset
        if not response.messages or len(found) >= limit:
            break
    return found


def _one(connection: Connection, args: argparse.Namespace) -> Message:
    from raftlog.client import NotFoundError

    found = _read(connection, args, args.offset, 1)
    if not found or found[0].queue_offset != args.offset:
        raise NotFoundError(f"group {args.group!r} has no dead letter at offset {args.offset}")
    return found[0]


def _first_topic(message: Message) -> str:
    return dict(message.properties).get("RETRY_TOPIC", "")


def _row(message: Message) -> dict[str, Any]:
    stored = datetime.fromtimestamp(message.store_timestamp_ms / 1000, UTC)
    return {
        "offset": message.queue_offset,
        "msg_id": message.msg_id,
        "original_topic": _first_topic(message),
        "reconsume_times": message.reconsume_times,
        "stored": stored.isoformat(timespec="milliseconds"),
        "tags": message.tags,
        "keys": list(message.keys),
        "uniq_key": message.uniq_key,
        "body_preview": message.body[:_PREVIEW_CHARS].decode("utf-8", "replace"),
    }


def _print_list(messages: list[Message], *, as_json: bool) -> None:
    rows = [_row(m) for m in messages]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = [("OFFSET", "MSG_ID", "TOPIC", "RETRIES", "STORED", "BODY")]
    table += [
        (
            str(r["offset"]),
            r["msg_id"],
            r["original_topic"],
            str(r["reconsume_times"]),
            r["stored"],
            repr(r["body_preview"]),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _print_one(message: Message) -> None:
    for name, value in _row(message).items():
        if name != "body_preview":
            print(f"{name}: {value}")
    print(f"born: {message.born_host} at {message.born_timestamp_ms} ms")
    for name, value in message.properties:
        print(f"property {name}: {value}")
    print(f"body ({len(message.body)} bytes): {message.body.decode('utf-8', 'replace')}")


def _resend(connection: Connection, args: argparse.Namespace, messages: list[Message]) -> None:
    """A first-delivery copy of each of ``messages`` to the topic it was first consumed from."""
    from raftlog.client import Producer

    with Producer(connection, timeout_s=args.timeout_s) as producer:
        for message in messages:
            topic = _first_topic(message)
            if not topic:
                raise UsageError(f"dead letter {message.queue_offset} names no RETRY_TOPIC")
            producer.send(
                topic,
                message.body,
                keys=message.keys,
                tags=message.tags,
                uniq_key=message.uniq_key,
                properties=[p for p in message.properties if p[0] not in _RESENT_DROPS],
            )
            print(f"resent {message.queue_offset} to {topic} (id {message.msg_id})")
    print(f"resent {len(messages)} dead letter(s) of group {args.group!r}")


def _resend_new(connection: Connection, args: argparse.Namespace) -> None:
    """Every dead letter past the last ``resend`` of the group, then record how far."""
    from raftlog.client import Consumer

    with Consumer(
        connection,
        f"{args.group}-dlq-resend",
        _dlq_topic(args),
        timeout_s=args.timeout_s,
        subscribe_retry=False,
    ) as reader:
        messages: list[Message] = []
        for _ in range(10_000):  # bounded: each poll moves on, or there is no more
            batch = reader.poll(0.0)
            if not batch:
                break
            messages += batch
        _resend(connection, args, messages)
        reader.commit()
