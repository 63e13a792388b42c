"""`raftlog transaction list|commit|rollback`: transactional messages left undecided, and an
operator's decision on one (docs/messaging.md, "Transactions").

- ``list [--topic T] [--group G]``: the half messages still undecided, one line each
  (transaction id, producer group, real topic, msg id, age). It reads the half topic
  ``RMQ_SYS_TRANS_HALF_TOPIC`` and the op topic ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` from their
  first live offsets up to the ends the leader's DescribeTopic gave, each with a Consumer on
  queue 0 that shares nothing, commits nothing and reads no retry topic (as `raftlog dlq
  resend` reads a topic). Which halves are decided is told by the node's own code, reused
  here, not copied: each pulled record is handed, as the store's MessageRecord, to
  node/messaging/transaction.py's ``half_of`` and ``op_of`` and the op records and halves to a
  ``TransactionTable`` (node/messaging/transaction_table.py), whose ``decision`` is what the
  leader's TransactionCoordinator answers. The cli layer may import node (the import
  contracts' layers; the client itself may not). A half decided between the two reads may
  still be listed: the list is a snapshot, and a decision on a decided one answers
  "decided already".
- ``commit|rollback --group G --topic T --id TRANSACTION_ID --msg-id MSG_ID``: ends the
  transaction through EndTransaction (client/transaction.py ``TransactionEnds``, retried:
  idempotent) and prints whether it was decided now or had been decided already (the
  recorded decision, which may differ from the one asked).

Rules this module keeps: like the other client commands, every command takes ``--servers``,
``--timeout-s``, the TLS flags and ``--token-file`` (common.connect); arguments are checked
before anything is sent (exit 2: an empty group, topic or id, a malformed msg id); a refusal
by the cluster (a msg id naming no half, or the half of another transaction) exits 1, an
unknown outcome 3.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from raftlog.cli.common import EXIT_OK, UsageError, add_connection_flags, connect

if TYPE_CHECKING:  # the client is imported lazily: `raftlog --help` stays fast
    from raftlog.client import Connection, Message
    from raftlog.node.messaging.transaction import HalfMessage
    from raftlog.store.record import MessageRecord

_READER_GROUP = "raftlog-cli-transaction"
_MAX_POLLS = 100_000


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `transaction list|commit|rollback`."""
    transaction = commands.add_parser(
        "transaction", help="list undecided transactions, commit or roll one back"
    )
    transaction.set_defaults(handler=run)
    actions = transaction.add_subparsers(dest="transaction_command", required=True)
    listing = actions.add_parser("list", help="the half messages still undecided")
    listing.add_argument("--topic", help="only those of this (real) topic")
    listing.add_argument("--group", help="only those of this producer group")
    add_connection_flags(listing)
    for name in ("commit", "rollback"):
        end = actions.add_parser(name, help=f"{name} one transaction (an operator's decision)")
        end.add_argument("--group", required=True, help="its producer group")
        end.add_argument("--topic", required=True, help="its real topic")
        end.add_argument("--id", required=True, help="the transaction id (its uniq_key)")
        end.add_argument("--msg-id", required=True, help="the half message's msg id")
        add_connection_flags(end)


def run(args: argparse.Namespace) -> int:
    """Dispatch one transaction command."""
    if args.transaction_command != "list":
        _check_end_arguments(args)
    with connect(args) as connection:
        if args.transaction_command == "list":
            _print_list(_undecided(connection, args), time.time())
        else:
            _end(connection, args)
    return EXIT_OK


def _check_end_arguments(args: argparse.Namespace) -> None:
    from raftlog.store.errors import InvalidMessageIdError
    from raftlog.store.message_id import decode_message_id

    for flag, value in (("--group", args.group), ("--topic", args.topic), ("--id", args.id)):
        if not value or any(c.isspace() for c in value):
            raise UsageError(f"{flag} must be non-empty and hold no space")
    try:
        decode_message_id(args.msg_id)
    except (InvalidMessageIdError, ValueError) as error:
        raise UsageError(f"--msg-id: {error}") from None


# ---------------------------------------------------------------------- list


def _undecided(connection: Connection, args: argparse.Namespace) -> list[tuple[HalfMessage, str]]:
    """The undecided halves (with their msg ids), oldest first, of ``--topic`` and
    ``--group`` when given."""
    from raftlog.client import Admin
    from raftlog.node.messaging.transaction import HALF_TOPIC, OP_TOPIC, half_of, op_of
    from raftlog.node.messaging.transaction_table import TransactionTable

    # Learn the leader (the connection then asks it first): a follower may not have applied
    # the latest halves and decisions, and a list just after `produce --transaction` must show
    # what that command wrote.
    with Admin(connection, timeout_s=args.timeout_s) as admin:
        admin.cluster_status()
    table = TransactionTable(0, 0, 0)
    first, ops = _read_topic(connection, OP_TOPIC, args.timeout_s)
    table.skip_ops_to(first)
    for message in ops:
        table.skip_ops_to(message.queue_offset)
        table.add_op(message.queue_offset, op_of(_as_record(message)))
    first, records = _read_topic(connection, HALF_TOPIC, args.timeout_s)
    table.skip_halves_to(first)
    halves = []
    for message in records:
        table.skip_halves_to(message.queue_offset)
        half = half_of(_as_record(message))
        table.add_half(half)
        halves.append((half, message.msg_id))
    return [
        (h, msg_id)
        for h, msg_id in halves
        if table.decision(h.queue_offset) is None
        and args.topic in (None, h.real_topic)
        and args.group in (None, h.producer_group)
    ]


def _read_topic(connection: Connection, topic: str, timeout_s: float) -> tuple[int, list[Message]]:
    """Queue 0 of ``topic``: its first live offset and its messages up to the end it has now."""
    from raftlog.client import Admin, Consumer

    with Admin(connection, timeout_s=timeout_s) as admin:
        queue = next(q for q in admin.describe_topic(topic).queues if q.queue_id == 0)
    found: list[Message] = []
    if queue.max_queue_offset <= queue.min_queue_offset:
        return queue.min_queue_offset, found
    deadline = time.monotonic() + timeout_s
    with Consumer(
        connection,
        _READER_GROUP,
        topic,
        queue_ids=[0],
        from_beginning=True,
        timeout_s=timeout_s,
        subscribe_retry=False,
    ) as reader:
        for _ in range(_MAX_POLLS):  # bounded: each poll moves on, or the deadline ends it
            found += reader.poll(0.2)
            if reader.positions.get(0, 0) >= queue.max_queue_offset:
                break
            if time.monotonic() > deadline:
                raise UsageError(f"reading {topic} took over --timeout-s {timeout_s:g}")
    return queue.min_queue_offset, found


def _as_record(message: Message) -> MessageRecord:
    """``message`` as the store's record (what half_of and op_of read): the client moved the
    unique key out of the properties, so it goes back in."""
    from raftlog.store.record import PROPERTY_UNIQ_KEY, MessageRecord

    properties = message.properties
    if message.uniq_key:
        properties = (*properties, (PROPERTY_UNIQ_KEY, message.uniq_key))
    return MessageRecord(
        topic=message.topic,
        queue_id=message.queue_id,
        flag=message.flag,
        queue_offset=message.queue_offset,
        physical_offset=message.physical_offset,
        sys_flag=message.sys_flag,
        born_timestamp_ms=message.born_timestamp_ms,
        born_host=("0.0.0.0", 0),
        store_timestamp_ms=message.store_timestamp_ms,
        store_host=("0.0.0.0", 0),
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
        body=message.body,
        properties=properties,
    )


def _print_list(halves: list[tuple[HalfMessage, str]], now_s: float) -> None:
    table = [("TRANSACTION_ID", "GROUP", "TOPIC", "MSG_ID", "AGE")]
    table += [
        (
            h.transaction_id,
            h.producer_group,
            h.real_topic,
            msg_id,
            f"{max(0.0, now_s - h.store_timestamp_ms / 1000):.1f}s",
        )
        for h, msg_id in halves
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(f"{len(halves)} undecided transaction(s)")


# ---------------------------------------------------------------------- commit, rollback


def _end(connection: Connection, args: argparse.Namespace) -> None:
    from raftlog.client import Message, RetryPolicy
    from raftlog.client.transaction import TransactionEnds, TransactionState

    commit = args.transaction_command == "commit"
    wanted = TransactionState.COMMIT if commit else TransactionState.ROLLBACK
    ends = TransactionEnds(
        connection,
        args.group,
        RetryPolicy(total_timeout_s=args.timeout_s, attempt_timeout_s=min(10.0, args.timeout_s)),
    )
    half = Message(
        topic=args.topic,
        queue_id=0,
        queue_offset=0,
        physical_offset=0,
        msg_id=args.msg_id,
        body=b"",
        uniq_key=args.id,
    )
    decided, result, duplicate = ends.end(half, wanted, from_check=False)
    state = decided.value.lower()
    if duplicate:
        print(f"transaction {args.id}: decided already ({state}); nothing stored now")
    elif result is not None:
        print(
            f"transaction {args.id}: {state} now; stored q{result.queue_id} "
            f"@{result.queue_offset} id={result.msg_id}"
        )
    else:
        print(f"transaction {args.id}: {state} now")
