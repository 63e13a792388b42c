"""The source's and sink's options, parsed and checked once, before any task runs.

Rules this module keeps:
- Names and meanings follow Spark's Kafka source (``startingOffsets``, ``endingOffsets``,
  ``startingTimestamp``, ``maxOffsetsPerTrigger``, ``minPartitions``, ``failOnDataLoss``), so a
  Spark user knows them; names are case-insensitive, as Spark passes them.
- A bad option raises ``OptionError`` (a ValueError) whose message names the option and the
  value, never a gRPC error: it is caught here, on the driver, before anything is read.
- The parsed options are plain frozen dataclasses of str/int/bool, so they pickle to the
  Python workers unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

# Kafka's special offsets in a JSON offsets option.
EARLIEST = -2
LATEST = -1
# Longer job ids still work (producer ids over the server's limit are hashed) but read badly
# in the server's logs.
MAX_JOB_ID_CHARS = 48


class OptionError(ValueError):
    """An option of the raftlog source or sink is missing or invalid (the message says which)."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """``earliest``, ``latest`` or a JSON map: ``default`` for every queue the map does not
    name, ``queues`` topic -> queue id -> offset (-2 earliest, -1 latest)."""

    default: int
    queues: tuple[tuple[str, int, int], ...] = ()

    def offset_for(self, topic: str, queue_id: int) -> int:
        for named_topic, named_queue, offset in self.queues:
            if named_topic == topic and named_queue == queue_id:
                return offset
        return self.default


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What to read: the cluster, the topics and the offset range (see docs/pipeline.md)."""

    servers: str
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp_ms: int | None
    ending_timestamp_ms: int | None
    min_partitions: int
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    timeout_s: float
    pushdown: bool = False
    # One member's address: every Pull goes to it alone and reads its own copy (this_replica),
    # for replica audits. None: any member serves.
    replica: str | None = None


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Where to write: the cluster, and the topic of rows without a ``topic`` column."""

    servers: str
    topic: str | None
    timeout_s: float
    # For tests of the exactly-once claim: a task's FIRST attempt fails on purpose once it has
    # stored this many rows (its retry must then store nothing twice). None: never.
    fail_first_attempt_after_rows: int | None = None
    # A batch write's job id (producer ids ``<job id>.<partition>``); None: a fresh UUID per
    # write. The same id again re-sends under the same producer ids, so a re-run of the same
    # input with the same partitioning stores nothing twice.
    job_id: str | None = None


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(name).lower(): str(value) for name, value in options.items()}


def _servers(options: dict[str, str]) -> str:
    servers = options.get("servers", "").strip()
    if not servers:
        raise OptionError(
            "option 'servers' is required: the cluster's members as host:port, comma separated "
            "(e.g. .option('servers', '127.0.0.1:7701,127.0.0.1:7702'))"
        )
    for address in servers.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise OptionError(f"option 'servers': {address.strip()!r} is not host:port")
    return servers


def _topics(options: dict[str, str]) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in options.get("topic", "").split(",") if t.strip())
    if not topics:
        raise OptionError("option 'topic' is required: one topic or a comma-separated list")
    if len(set(topics)) != len(topics):
        raise OptionError(f"option 'topic' names a topic twice: {options['topic']!r}")
    return topics


def parse_offsets(name: str, text: str, topics: tuple[str, ...], default: int) -> OffsetSpec:
    """``earliest`` / ``latest`` / JSON ``{"topic": {"0": 23, "1": -2}}`` -> OffsetSpec."""
    word = text.strip().lower()
    if word in ("", "earliest", "latest"):
        return OffsetSpec({"": default, "earliest": EARLIEST, "latest": LATEST}[word])
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise OptionError(
            f"option {name!r}: {text!r} is neither 'earliest', 'latest' nor JSON like "
            '{"topic": {"0": 23, "1": -2}}'
        ) from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option {name!r}: the JSON must be an object of topics")
    queues: list[tuple[str, int, int]] = []
    for topic, per_queue in parsed.items():
        if topic not in topics:
            raise OptionError(f"option {name!r} names topic {topic!r}, which is not read")
        if not isinstance(per_queue, dict):
            raise OptionError(f"option {name!r}: topic {topic!r} must map queue ids to offsets")
        for queue_text, offset in per_queue.items():
            if not str(queue_text).isdigit():
                raise OptionError(f"option {name!r}: queue id {queue_text!r} is not a number")
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                raise OptionError(
                    f"option {name!r}: offset {offset!r} of {topic}/{queue_text} must be an "
                    "integer >= 0, or -2 (earliest) or -1 (latest)"
                )
            queues.append((topic, int(queue_text), offset))
    return OffsetSpec(default, tuple(queues))


def _int_option(options: dict[str, str], name: str, minimum: int) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(f"option {name!r}: {text!r} is not an integer") from None
    if value < minimum:
        raise OptionError(f"option {name!r} is {value}; it must be at least {minimum}")
    return value


def _bool_option(options: dict[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(f"option {name!r}: {text!r} is neither 'true' nor 'false'")
    return text.strip().lower() == "true"


def _address(options: dict[str, str], name: str) -> str | None:
    text = options.get(name.lower(), "").strip()
    if not text:
        return None
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or "," in text:
        raise OptionError(f"option {name!r}: {text!r} is not one host:port")
    return text


def _job_id(options: dict[str, str]) -> str | None:
    text = options.get("jobid")
    if text is None:
        return None
    if not text.strip() or any(c.isspace() for c in text) or len(text) > MAX_JOB_ID_CHARS:
        raise OptionError(
            f"option 'jobId': {text!r} must be 1 to {MAX_JOB_ID_CHARS} characters, no spaces"
        )
    return text


def _timeout_s(options: dict[str, str]) -> float:
    timeout_ms = _int_option(options, "timeoutMs", 1)
    return 30.0 if timeout_ms is None else timeout_ms / 1000


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """The source's options. A stream starts at the latest offsets unless told otherwise and
    has no end; a batch read goes from the earliest to the latest offsets (as Kafka's)."""
    lowered = _lowered(options)
    topics = _topics(lowered)
    if streaming and ("endingoffsets" in lowered or "endingtimestamp" in lowered):
        raise OptionError("options 'endingOffsets' / 'endingTimestamp' are for batch reads only")
    if streaming and "replica" in lowered:
        raise OptionError("option 'replica' is for batch reads only (replica audits)")
    if not streaming and "maxoffsetspertrigger" in lowered:
        raise OptionError("option 'maxOffsetsPerTrigger' is for streaming reads only")
    starting = parse_offsets(
        "startingOffsets",
        lowered.get("startingoffsets", ""),
        topics,
        LATEST if streaming else EARLIEST,
    )
    ending = parse_offsets("endingOffsets", lowered.get("endingoffsets", ""), topics, LATEST)
    if ending.default == EARLIEST or any(o == EARLIEST for _, _, o in ending.queues):
        raise OptionError("option 'endingOffsets' cannot be earliest (-2)")
    return ReadOptions(
        servers=_servers(lowered),
        topics=topics,
        starting=starting,
        ending=ending,
        starting_timestamp_ms=_int_option(lowered, "startingTimestamp", 0),
        ending_timestamp_ms=_int_option(lowered, "endingTimestamp", 0),
        min_partitions=_int_option(lowered, "minPartitions", 1) or 1,
        max_offsets_per_trigger=_int_option(lowered, "maxOffsetsPerTrigger", 1),
        fail_on_data_loss=_bool_option(lowered, "failOnDataLoss", True),
        timeout_s=_timeout_s(lowered),
        pushdown=_bool_option(lowered, "pushdown", False),
        replica=_address(lowered, "replica"),
    )


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """The sink's options: ``servers``, an optional ``topic`` (one topic) and ``jobId``."""
    lowered = _lowered(options)
    topic = lowered.get("topic", "").strip() or None
    if topic is not None and "," in topic:
        raise OptionError(f"option 'topic' of the sink is one topic, not a list: {topic!r}")
    return WriteOptions(
        servers=_servers(lowered),
        topic=topic,
        timeout_s=_timeout_s(lowered),
        fail_first_attempt_after_rows=_int_option(lowered, "failFirstAttemptAfterRows", 1),
        job_id=_job_id(lowered),
    )
