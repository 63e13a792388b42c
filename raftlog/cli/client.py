"""`raftlog topic|produce|consume|query|leader`: the client commands.

Rules this module keeps: every command takes ``--servers host:port,...`` (default: the local
cluster in ./data/cluster.json, else 127.0.0.1:7701..7703) and the TLS flags, and dials through
common.connect(); output is one line per item on stdout; errors are raised (cli.py prints them
as one line and picks the exit status: 1 failed, 3 unknown outcome).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import Any

from raftlog.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNKNOWN_OUTCOME,
    UsageError,
    add_connection_flags,
    connect,
)


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register topic, produce, consume, query and leader."""
    topic = commands.add_parser("topic", help="create, list or describe topics")
    topics = topic.add_subparsers(dest="topic_command", required=True)
    create = topics.add_parser("create", help="create a topic (or grow its queue count)")
    create.add_argument("name")
    create.add_argument("--queues", type=int, default=4, help="queue count (default 4)")
    add_connection_flags(create)
    add_connection_flags(topics.add_parser("list", help="list topics"))
    describe = topics.add_parser("describe", help="a topic's queues and offsets")
    describe.add_argument("name")
    add_connection_flags(describe)

    _add_produce(commands)
    _add_consume(commands)
    _add_query(commands)
    leader = commands.add_parser("leader", help="leadership")
    leaders = leader.add_subparsers(dest="leader_command", required=True)
    transfer = leaders.add_parser("transfer", help="hand leadership to another voter")
    transfer.add_argument("--to", default="", help="target node id (default: most up to date)")
    add_connection_flags(transfer)


def _add_produce(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register produce."""
    produce = commands.add_parser("produce", help="send messages (BODY, or stdin lines)")
    produce.add_argument("topic")
    produce.add_argument("body", nargs="?", help="the body; omitted: one message per stdin line")
    produce.add_argument("--key", action="append", default=[], help="a key (repeatable)")
    produce.add_argument("--tag", default="", help="the message tag")
    produce.add_argument("--count", type=int, default=1, help="send BODY this many times")
    produce.add_argument("--queue", type=int, help="an explicit queue id")
    produce.add_argument(
        "--sharding-key", help="one queue per key (crc32 %% queues): its messages stay in order"
    )
    produce.add_argument(
        "--delay-level", type=int, default=0, help="deliver after this delay level (1s 5s ...)"
    )
    produce.add_argument(
        "--deliver-at-ms", type=int, default=0, help="deliver at this time (ms since the epoch)"
    )
    produce.add_argument(
        "--transaction",
        choices=("commit", "rollback", "unknown"),
        help="send in a transaction whose local transaction answers this (unknown: left "
        "undecided, see `raftlog transaction list`)",
    )
    produce.add_argument(
        "--producer-group", default="raftlog-cli-producer", help="with --transaction: its group"
    )
    add_connection_flags(produce)


def _add_consume(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register consume."""
    consume = commands.add_parser("consume", help="print a topic's messages")
    consume.add_argument("topic")
    consume.add_argument("--group", default="raftlog-cli", help="consumer group")
    consume.add_argument("--from-beginning", action="store_true", help="ignore committed offsets")
    consume.add_argument("--max", type=int, help="stop after this many messages")
    consume.add_argument(
        "--timeout", type=float, default=5.0, help="stop after this many idle seconds"
    )
    consume.add_argument("--no-commit", action="store_true", help="do not commit offsets")
    consume.add_argument(
        "--orderly", action="store_true", help="read a queue only while holding its lock"
    )
    add_connection_flags(consume)


def _add_query(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register query key|time|id."""
    query = commands.add_parser("query", help="find messages by key, time or id")
    queries = query.add_subparsers(dest="query_command", required=True)
    by_key = queries.add_parser("key", help="messages with a key (or unique key)")
    by_key.add_argument("topic")
    by_key.add_argument("key")
    by_key.add_argument("--begin-ms", type=int, default=0)
    by_key.add_argument("--end-ms", type=int, default=0)
    by_key.add_argument("--max", type=int, default=0)
    add_connection_flags(by_key)
    by_time = queries.add_parser("time", help="the first offset stored at or after a time")
    by_time.add_argument("topic")
    by_time.add_argument("queue_id", type=int)
    by_time.add_argument("timestamp_ms", type=int)
    add_connection_flags(by_time)
    by_id = queries.add_parser("id", help="the message an offset message id names")
    by_id.add_argument("msg_id")
    add_connection_flags(by_id)


def _print_message(message: Any) -> None:
    body = message.body.decode("utf-8", "backslashreplace").replace("\n", "\\n")
    keys = ",".join(message.keys) or "-"
    print(
        f"{message.topic} q{message.queue_id} @{message.queue_offset} id={message.msg_id} "
        f"keys={keys} tag={message.tags or '-'} t={message.store_timestamp_ms} {body}"
    )


def run(args: argparse.Namespace) -> int:
    """Dispatch one client command."""
    handler = {
        "topic": _topic,
        "produce": _produce,
        "consume": _consume,
        "query": _query,
        "leader": _leader,
    }[args.command]
    return handler(args)


def _topic(args: argparse.Namespace) -> int:
    from raftlog.client import Admin

    with connect(args) as connection, Admin(connection, timeout_s=args.timeout_s) as admin:
        if args.topic_command == "create":
            if args.queues < 1:
                raise UsageError("--queues must be at least 1")
            creation = admin.create_topic(args.name, args.queues)
            verb = "created" if creation.created else "unchanged"
            print(f"{creation.topic.name}: {creation.topic.queue_count} queues ({verb})")
        elif args.topic_command == "list":
            for topic in admin.list_topics():
                print(f"{topic.name}\t{topic.queue_count}")
        else:
            admin.cluster_status()  # learn the leader: a follower may not have applied all yet
            description = admin.describe_topic(args.name)
            print(f"{description.topic.name}: {description.topic.queue_count} queues")
            print("QUEUE  MIN  MAX  LAST_STORE_MS")
            for q in description.queues:
                print(
                    f"{q.queue_id}  {q.min_queue_offset}  {q.max_queue_offset}  "
                    f"{q.last_store_timestamp_ms}"
                )
    return EXIT_OK


def _bodies(args: argparse.Namespace) -> Iterator[bytes]:
    if args.body is not None:
        for _ in range(args.count):
            yield args.body.encode()
        return
    for line in sys.stdin:
        yield line.rstrip("\n").encode()


def _produce(args: argparse.Namespace) -> int:
    from raftlog.client import Producer, RaftlogError, UnknownOutcomeError

    if args.count < 1:
        raise UsageError("--count must be at least 1")
    if any(not k or " " in k for k in args.key):
        raise UsageError("--key must be non-empty and hold no space")
    if args.queue is not None and args.sharding_key is not None:
        raise UsageError("--queue and --sharding-key: give at most one")
    if args.transaction is not None:
        return _produce_in_transaction(args)
    failures = unknown = 0
    with connect(args) as connection, Producer(connection, timeout_s=args.timeout_s) as producer:
        delay = {"delay_level": args.delay_level, "deliver_at_ms": args.deliver_at_ms}
        try:
            futures = [
                producer.send_async(
                    args.topic,
                    body,
                    keys=args.key,
                    tags=args.tag,
                    queue_id=args.queue,
                    sharding_key=args.sharding_key,
                    **delay,
                )
                for body in _bodies(args)
            ]
        except ValueError as error:  # both delays, or a negative one
            raise UsageError(f"--delay-level / --deliver-at-ms: {error}") from None
        for future in futures:
            try:
                result = future.result()
            except UnknownOutcomeError as error:
                unknown += 1
                print(f"raftlog: unknown outcome: {error}", file=sys.stderr)
                continue
            except RaftlogError as error:
                failures += 1
                print(f"raftlog: {type(error).__name__}: {error}", file=sys.stderr)
                continue
            # Stored on the master but not (yet) on enough slaves: said, not hidden.
            replicated = "" if result.replicated else f" {result.send_status}"
            print(
                f"sent q{result.queue_id} @{result.queue_offset} id={result.msg_id} "
                f"uniq={result.uniq_key}{' (duplicate)' if result.duplicate else ''}{replicated}"
            )
    if failures:
        return EXIT_FAILED
    return EXIT_UNKNOWN_OUTCOME if unknown else EXIT_OK


def _consume(args: argparse.Namespace) -> int:
    from raftlog.client import Consumer

    if args.max is not None and args.max < 1:
        raise UsageError("--max must be at least 1")
    if args.timeout < 0:
        raise UsageError("--timeout must be >= 0")
    count = 0
    connection = connect(args)
    consumer = Consumer(
        connection,
        args.group,
        args.topic,
        from_beginning=args.from_beginning,
        timeout_s=args.timeout_s,
        orderly=args.orderly,
    )
    with connection, consumer:
        deadline_idle_s = args.timeout
        idle_since = time.monotonic()
        # Bounded by --max and by --timeout idle seconds.
        while args.max is None or count < args.max:
            remaining_s = deadline_idle_s - (time.monotonic() - idle_since)
            if remaining_s <= 0:
                break
            messages = consumer.poll(min(1.0, remaining_s))
            if messages:
                idle_since = time.monotonic()
            for message in messages:
                if args.max is not None and count >= args.max:
                    # Not printed: move back so a commit does not skip it.
                    consumer.seek(message.queue_id, message.queue_offset)
                    break
                _print_message(message)
                count += 1
        if not args.no_commit:
            consumer.commit()
    print(f"{count} message(s)", file=sys.stderr)
    return EXIT_OK


def _query(args: argparse.Namespace) -> int:
    from raftlog.client import Admin

    with connect(args) as connection, Admin(connection, timeout_s=args.timeout_s) as admin:
        if args.query_command == "key":
            messages = admin.query_by_key(
                args.topic,
                args.key,
                begin_timestamp_ms=args.begin_ms,
                end_timestamp_ms=args.end_ms,
                max_messages=args.max,
            )
            for message in messages:
                _print_message(message)
            print(f"{len(messages)} message(s)", file=sys.stderr)
        elif args.query_command == "time":
            print(admin.query_by_time(args.topic, args.queue_id, args.timestamp_ms))
        else:
            _print_message(admin.query_by_id(args.msg_id))
    return EXIT_OK


def _leader(args: argparse.Namespace) -> int:
    from raftlog.client import Admin

    with connect(args) as connection, Admin(connection, timeout_s=args.timeout_s) as admin:
        leader = admin.transfer_leadership(args.to, timeout_s=args.timeout_s)
    print(f"leader is {leader.leader_id} at {leader.leader_address} (term {leader.term})")
    return EXIT_OK if leader.leader_id else EXIT_FAILED


def _produce_in_transaction(args: argparse.Namespace) -> int:
    """Each body sent with Producer.send_in_transaction, its local transaction answering
    ``--transaction`` (docs/messaging.md "Transactions")."""
    from raftlog.client import Producer, TransactionState

    if args.delay_level or args.deliver_at_ms:
        raise UsageError("--transaction: a transactional message cannot have a delay")
    state = TransactionState[args.transaction.upper()]
    group = args.producer_group
    with (
        connect(args) as connection,
        Producer(connection, timeout_s=args.timeout_s, group=group) as producer,
    ):
        for body in _bodies(args):
            sent = producer.send_in_transaction(
                args.topic,
                body,
                local_transaction=lambda message: state,
                keys=args.key,
                tags=args.tag,
                queue_id=args.queue,
                sharding_key=args.sharding_key,
            )
            stored = f" stored id={sent.result.msg_id}" if sent.result is not None else ""
            print(
                f"transaction {sent.transaction_id} half id={sent.half.msg_id} group={group}: "
                f"{sent.state.value}{' (decided already)' if sent.duplicate else ''}{stored}"
            )
    return EXIT_OK
