"""A node's configuration: one frozen, validated dataclass and the loader that builds it.

Sources, highest precedence first: command-line flags (``overrides``), environment variables
``RAFTLOG_<FIELD_UPPER>`` (``RAFTLOG_PEERS`` as ``"n1=host:port,n2=host:port"``), a TOML file,
then the defaults below. docs/configuration.md ("Node configuration") lists every field.

Rules this module keeps:
- Every size and time carries its unit in its name; every field is checked when the dataclass
  is built, so a bad configuration fails at start-up with a ``ConfigError`` whose message names
  the field, the value and what is wrong (and, from the loader, where the value came from).
- ``NodeConfig(...)`` itself never touches the disk; ``load_config`` also checks that
  ``data_dir`` exists as a writable directory or can be created, without creating it.
- Unknown keys in the TOML file are errors (a misspelt setting must not be silently ignored);
  unknown ``RAFTLOG_*`` environment variables are ignored (other tools share the prefix).
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field

from raftlog.node.config_roles import master_slave_problem
from raftlog.node.messaging.delay import (
    DEFAULT_DELAY_LEVELS,
    DEFAULT_TIMER_MAX_DELAY_MS,
    DelaySettings,
    parse_delay_levels,
)
from raftlog.node.messaging.transaction_table import (
    DEFAULT_TRANSACTION_CHECK_INTERVAL_MS,
    DEFAULT_TRANSACTION_CHECK_MAX,
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    TransactionSettings,
)
from raftlog.store.config import FlushMode, StoreConfig
from raftlog.store.topic_config import MAX_QUEUE_COUNT
from raftlog.store.validation import Limits

MIB = 1024 * 1024
ENV_PREFIX = "RAFTLOG_"
DURABILITY_MODES = ("fsync", "write")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
# The store subdirectory of data_dir; the Raft log and hard state live beside it.
STORE_SUBDIR = "store"
_MAX_SWITCH_INTERVAL_US = 1_000_000
# The settings node/services/limits.py applies to requests (each a positive integer).
REQUEST_LIMIT_FIELDS = (
    "max_properties_bytes",
    "max_topic_queue_count",
    "max_topic_count",
    "max_produce_request_bytes",
    "max_produce_message_count",
    "max_inflight_produce_count",
    "max_pull_message_count",
)
# A member's peer port, unless named in ``peer_addresses``: its client port plus this.
PEER_PORT_OFFSET = 1000

_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
CLIENT_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
"""A client's name in access rules: a tokens file's name or a certificate's common name."""
# A DNS name or IPv4 literal; IPv6 literals are written in brackets and checked apart.
_HOST_PATTERN = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_IPV6_PATTERN = re.compile(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?")


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names the field and the fix."""


def parse_address(value: str, what: str, *, min_port: int = 1) -> tuple[str, int]:
    """Split ``"host:port"`` (IPv6 as ``"[::1]:7701"``) into host and port.

    ``what`` names the field in the error message. Raises ConfigError when the host is empty or
    malformed or the port is not an integer in ``min_port``..65535 (0 = "any free port").
    """
    if not isinstance(value, str):
        raise ConfigError(f"{what}: {value!r} is not a string of the form host:port")
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{what}: {value!r} is not of the form host:port")
    if host.startswith("["):
        if not host.endswith("]") or not _IPV6_PATTERN.fullmatch(host[1:-1]):
            raise ConfigError(f"{what}: {value!r} has a malformed bracketed IPv6 host")
        host = host[1:-1]
    elif not _HOST_PATTERN.fullmatch(host):
        raise ConfigError(
            f"{what}: {value!r} has a malformed host {host!r} (IPv6 hosts go in brackets)"
        )
    if not port_text.isdigit() or not min_port <= int(port_text) <= 65535:
        raise ConfigError(f"{what}: {value!r} has port {port_text!r}; it must be {min_port}..65535")
    return host, int(port_text)


def derived_peer_address(client_address: str) -> str:
    """The peer port's address of a member reached at ``client_address``: the same host, the
    port plus PEER_PORT_OFFSET (node/peer/addresses.py says why)."""
    host, port = parse_address(client_address, "peer address")
    peer_port = port + PEER_PORT_OFFSET
    if peer_port > 65535:
        raise ConfigError(
            f"peer_addresses: the peer port of {client_address!r} would be {peer_port}; "
            "name it in peer_addresses (and peer_listen on that node)"
        )
    shown_host = f"[{host}]" if ":" in host else host
    return f"{shown_host}:{peer_port}"


def parse_peers(text: str, what: str = "peers") -> dict[str, str]:
    """Parse ``"n1=host:port,n2=host:port"`` into a dict (the env/CLI form of ``peers``)."""
    peers: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        node_id, sep, address = item.partition("=")
        if not sep:
            raise ConfigError(f"{what}: {item!r} is not of the form node_id=host:port")
        node_id = node_id.strip()
        if node_id in peers:
            raise ConfigError(f"{what}: node id {node_id!r} is listed twice")
        peers[node_id] = address.strip()
    return peers


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Everything one raftlog node needs to start. All fields are validated on construction.

    ``peers`` maps every voter's node id (this node included) to the address the others reach
    it at; ``advertise_address`` (default ``listen_address``) is what this node tells clients
    and peers, and must equal ``peers[node_id]``.
    """

    node_id: str
    listen_address: str
    # Excluded from the hash (a dict is unhashable) but compared for equality.
    peers: dict[str, str] = field(hash=False)
    data_dir: str
    advertise_address: str | None = None
    cluster_id: str = "raftlog"
    # "fsync": acknowledge once a majority fsynced the entry; "write": once a majority wrote it
    # (survives a process crash, not a power loss of a majority).
    durability: str = "fsync"
    tick_ms: int = 50
    election_ticks: int = 10
    heartbeat_ticks: int = 2
    segment_size_bytes: int = 64 * MIB
    max_body_bytes: int = 4 * MIB
    max_write_timeout_ms: int = 10_000
    max_inflight_bytes: int = 64 * MIB
    # Request limits (docs/configuration.md, "Limits"; node/services/limits.py says why each
    # default): a request over one is refused with a message naming the setting.
    max_properties_bytes: int = 32767
    max_topic_queue_count: int = 1024
    max_topic_count: int = 8192
    max_produce_request_bytes: int = 16 * MIB
    max_produce_message_count: int = 4096
    max_inflight_produce_count: int = 128
    max_pull_message_count: int = 1024
    preferred_leader: str | None = None
    file_reserved_hours: int = 72
    disk_clean_watermark_ratio: float = 0.75
    disk_force_clean_ratio: float = 0.85
    disk_full_ratio: float = 0.90
    log_level: str = "info"
    # How long a graceful stop (SIGTERM) may take whatever peers and clients do: a leader's
    # handover (up to 3 s of it), the servers' grace for open calls (0.5 s) and closing the
    # peer streams share it (node/process.py). `raftlog cluster down` SIGKILLs after 15 s.
    stop_grace_ms: int = 5000
    # CPython's GIL switch interval for the node process (sys.setswitchinterval): how long a
    # thread may hold the GIL while another waits for it. Measured (docs/PERFORMANCE.md):
    # smaller values do not lower single-message latency (the threads a message crosses
    # mostly block, which hands the GIL over at once) and cost batch throughput.
    switch_interval_us: int = 5000
    # The Prometheus endpoint's "host:port" (its own port; port 0 picks a free one); None =
    # no endpoint. docs/operations.md, "Metrics", lists what it serves.
    metrics_listen: str | None = None
    # -- master-slave mode (RocketMQ's classic HA; docs/replication.md). In "raft" mode these
    # keep their defaults: a master-slave setting given to a Raft node is refused.
    replication: str = "raft"
    broker_name: str = "broker-a"
    broker_id: int = 0
    # SYNC_MASTER / ASYNC_MASTER / SLAVE; None = ASYNC_MASTER for broker_id 0, else SLAVE.
    broker_role: str | None = None
    # SYNC_FLUSH / ASYNC_FLUSH; None = follow ``durability`` (fsync = SYNC_FLUSH).
    flush_disk_type: str | None = None
    # Replicas (the master included) that must hold a write before a SYNC_MASTER acknowledges
    # it; None = 2 for a SYNC_MASTER, 1 for an ASYNC_MASTER.
    min_in_sync_replicas: int | None = None
    # A slave further behind than either bound leaves the in-sync set (RocketMQ's
    # haMaxGapNotInSync and haMaxTimeSlaveNotCatchup).
    ha_max_gap_not_in_sync_bytes: int = 256 * MIB
    ha_max_time_slave_not_catchup_ms: int = 15_000
    # How long a SYNC_MASTER waits for its in-sync slaves (RocketMQ's syncFlushTimeout).
    sync_flush_timeout_ms: int = 5_000
    # A static slave's master (host:port of its peer port, one of ``peers``).
    ha_master_address: str | None = None
    slave_read_enable: bool = False
    # Controller mode: the controller members' gRPC host:port list; None = static mode.
    controller_addresses: str | None = None
    # Raft mode: members ("host:port,...") to ask to add this node as a learner when its data
    # dir is fresh; it then catches up and asks to be promoted to voter (docs/operations.md,
    # "Membership changes"). ``peers`` may then list only this node.
    join: str | None = None
    # How long a joining node keeps asking to be added, and then promoted, before giving up.
    join_timeout_ms: int = 600_000
    # -- the peer port (docs/security.md): Raft's RaftPeer and master-slave's HaPeer are
    # served here, never on the client port. None = the listen host, port + PEER_PORT_OFFSET.
    peer_listen: str | None = None
    # Members whose peer port is not their client port + PEER_PORT_OFFSET, as
    # "n1=host:port,..." (node id -> peer host:port); None = derive every one.
    peer_addresses: dict[str, str] | None = field(default=None, hash=False)
    # -- TLS (docs/security.md): the CA, this node's certificate and key (PEM files, reloaded
    # when they change), all three or none (plain TCP). The peer port then requires a client
    # certificate naming the peer's node id; the client port does with tls_client_auth_enable.
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_client_auth_enable: bool = False
    # -- client authentication (docs/security.md): a file of "name:token" lines; with it, every
    # client-port call needs "authorization: Bearer <token>" (health excepted). None = open.
    auth_tokens_file: str | None = None
    # -- access control (docs/security.md): enforce the replicated access rules on the client
    # port (it needs auth_tokens_file or tls_client_auth_enable to tell clients apart);
    # acl_superusers: comma-separated client names allowed everything (they make the rules).
    acl_enable: bool = False
    acl_superusers: str | None = None
    # -- delay messages (docs/messaging.md): the delay levels, RocketMQ's messageDelayLevel
    # (level N = the N-th duration; the same on every member), and how far ahead a
    # ``deliver_at_ms`` may be (RocketMQ's timerMaxDelaySec).
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    timer_max_delay_ms: int = DEFAULT_TIMER_MAX_DELAY_MS
    # -- orderly consumption (docs/messaging.md): a queue lock's lease, RocketMQ's
    # REBALANCE_LOCK_MAX_LIVE_TIME; a new leader grants no lock for this long after it took
    # over, so set it the same on every member.
    consumer_lock_lease_ms: int = 30_000
    # -- transactional messages (docs/messaging.md): a half message undecided this long is
    # checked back with a producer of its group (RocketMQ's transactionTimeOut), again every
    # check interval (transactionCheckInterval), at most transaction_check_max times
    # (transactionCheckMax); then the leader rolls it back.
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    transaction_check_interval_ms: int = DEFAULT_TRANSACTION_CHECK_INTERVAL_MS
    transaction_check_max: int = DEFAULT_TRANSACTION_CHECK_MAX

    def __post_init__(self) -> None:
        check_id("node_id", self.node_id)
        check_id("cluster_id", self.cluster_id)
        parse_address(self.listen_address, "listen_address")
        if self.advertise_address is not None:
            parse_address(self.advertise_address, "advertise_address")
        self._check_metrics_listen()
        self._check_peers()
        self._check_peer_port()
        if not isinstance(self.data_dir, str) or not self.data_dir:
            raise ConfigError("data_dir: must be a non-empty path")
        if self.durability not in DURABILITY_MODES:
            raise ConfigError(
                f"durability: {self.durability!r} is not one of {', '.join(DURABILITY_MODES)}"
            )
        self._check_positive_integers()
        if self.switch_interval_us > _MAX_SWITCH_INTERVAL_US:
            raise ConfigError(
                f"switch_interval_us: {self.switch_interval_us} is above "
                f"{_MAX_SWITCH_INTERVAL_US} (one second)"
            )
        if type(self.file_reserved_hours) is not int or self.file_reserved_hours < 0:
            raise ConfigError(
                f"file_reserved_hours: {self.file_reserved_hours!r} must be an integer >= 0"
            )
        if self.election_ticks <= self.heartbeat_ticks:
            raise ConfigError(
                f"election_ticks: {self.election_ticks} must be greater than heartbeat_ticks "
                f"({self.heartbeat_ticks}), or followers time out between heartbeats"
            )
        # A record (body + properties + header) must fit in one CommitLog segment.
        if self.segment_size_bytes <= self.max_body_bytes:
            raise ConfigError(
                f"segment_size_bytes: {self.segment_size_bytes} must be greater than "
                f"max_body_bytes ({self.max_body_bytes}) so the largest message fits a segment"
            )
        # Otherwise a message at the body limit could never be admitted.
        if self.max_inflight_bytes < self.max_body_bytes:
            raise ConfigError(
                f"max_inflight_bytes: {self.max_inflight_bytes} must be at least "
                f"max_body_bytes ({self.max_body_bytes})"
            )
        self._check_ratios()
        self._check_request_limits()
        if self.preferred_leader is not None and self.preferred_leader not in self.peers:
            raise ConfigError(
                f"preferred_leader: {self.preferred_leader!r} is not in peers "
                f"({', '.join(sorted(self.peers))})"
            )
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(
                f"log_level: {self.log_level!r} is not one of {', '.join(LOG_LEVELS)}"
            )
        self._check_join()
        problem = master_slave_problem(self)
        if problem is not None:
            raise ConfigError(problem)

    def _check_positive_integers(self) -> None:
        for name in (
            "tick_ms",
            "election_ticks",
            "heartbeat_ticks",
            "segment_size_bytes",
            "max_body_bytes",
            "max_write_timeout_ms",
            "max_inflight_bytes",
            "switch_interval_us",
            "stop_grace_ms",
            "consumer_lock_lease_ms",
            "transaction_timeout_ms",
            "transaction_check_interval_ms",
            "transaction_check_max",
            *REQUEST_LIMIT_FIELDS,
        ):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ConfigError(f"{name}: {value!r} must be a positive integer")

    def _check_request_limits(self) -> None:
        try:
            self.store_config()
        except ValueError as error:
            raise ConfigError(f"max_properties_bytes: {error}") from None
        if self.max_topic_queue_count > MAX_QUEUE_COUNT:
            raise ConfigError(
                f"max_topic_queue_count: {self.max_topic_queue_count} is above the store's "
                f"{MAX_QUEUE_COUNT}"
            )
        # Otherwise a message at the body limit could never be produced.
        if self.max_produce_request_bytes <= self.max_body_bytes:
            raise ConfigError(
                f"max_produce_request_bytes: {self.max_produce_request_bytes} must be greater "
                f"than max_body_bytes ({self.max_body_bytes})"
            )
        self.delay_settings()  # the delay levels and bound a produce is checked against

    def _check_metrics_listen(self) -> None:
        if self.metrics_listen is None:
            return
        parse_address(self.metrics_listen, "metrics_listen", min_port=0)
        if self.metrics_listen == self.listen_address:
            raise ConfigError(
                f"metrics_listen: {self.metrics_listen!r} is the listen address; the metrics "
                "endpoint needs a port of its own"
            )

    def _check_peer_port(self) -> None:
        listen = self.peer_listen_address
        parse_address(listen, "peer_listen")
        if listen in (self.listen_address, self.metrics_listen):
            raise ConfigError(
                f"peer_listen: {listen!r} is already the listen or metrics address; the peer "
                "port needs a port of its own"
            )
        if self.peer_addresses is not None:
            if not isinstance(self.peer_addresses, dict):
                raise ConfigError("peer_addresses: must map node ids to host:port")
            for peer_id, address in self.peer_addresses.items():
                check_id("peer_addresses", peer_id)
                parse_address(address, f"peer_addresses[{peer_id}]")
        self._check_tls()

    def _check_tls(self) -> None:
        files = (self.tls_ca_file, self.tls_cert_file, self.tls_key_file)
        if any(f is not None for f in files) and not all(files):
            raise ConfigError(
                "tls_cert_file: TLS needs tls_ca_file, tls_cert_file and tls_key_file together"
            )
        if self.tls_client_auth_enable and not self.tls_enabled:
            raise ConfigError("tls_client_auth_enable: needs TLS (tls_cert_file and the others)")
        if self.acl_enable and not (self.auth_tokens_file or self.tls_client_auth_enable):
            raise ConfigError(
                "acl_enable: needs auth_tokens_file or tls_client_auth_enable, so the node can "
                "tell clients apart"
            )
        for name in self.superusers:
            if not CLIENT_NAME_PATTERN.fullmatch(name):
                raise ConfigError(
                    f"acl_superusers: {name!r} is not a client name (1..64 characters from "
                    "[A-Za-z0-9_.@-])"
                )

    def delay_settings(self) -> DelaySettings:
        """The delay levels and bound (ConfigError naming a bad one)."""
        try:
            levels_ms = parse_delay_levels(self.message_delay_level)
        except ValueError as error:
            raise ConfigError(f"message_delay_level: {error}") from None
        if type(self.timer_max_delay_ms) is not int or self.timer_max_delay_ms <= 0:
            raise ConfigError(
                f"timer_max_delay_ms: {self.timer_max_delay_ms!r} must be a positive integer"
            )
        return DelaySettings(levels_ms, self.timer_max_delay_ms)

    def transaction_settings(self) -> TransactionSettings:
        """The transactions' check-back settings (checked positive by ``__post_init__``)."""
        return TransactionSettings(
            self.transaction_timeout_ms,
            self.transaction_check_interval_ms,
            self.transaction_check_max,
        )

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert_file is not None

    def exposure_warning(self) -> str | None:
        """The one line a node prints at start when its client port listens beyond this host
        without TLS (issue 16: anyone on the network could then read and write); None on a
        loopback address or with TLS."""
        if self.tls_enabled:
            return None
        host, _ = parse_address(self.listen_address, "listen_address")
        if host == "localhost":
            return None
        try:
            if ipaddress.ip_address(host).is_loopback:
                return None
        except ValueError:
            pass  # a host name other than localhost: reachable from elsewhere
        return (
            f"warning: the client port {self.listen_address} is reachable beyond this host "
            "without TLS; anyone who can reach it can read and write (docs/security.md)"
        )

    @property
    def peer_listen_address(self) -> str:
        """Where the peer port listens: ``peer_listen``, or derived from the listen address."""
        return self.peer_listen or derived_peer_address(self.listen_address)

    def _check_peers(self) -> None:
        if not isinstance(self.peers, dict) or not self.peers:
            raise ConfigError("peers: must list every voter as node_id=host:port, this node too")
        for peer_id, address in self.peers.items():
            check_id("peers", peer_id)
            parse_address(address, f"peers[{peer_id}]")
        if self.node_id not in self.peers:
            raise ConfigError(
                f"peers: does not contain this node's id {self.node_id!r} "
                f"(peers lists every voter, this node included)"
            )
        own = self.peers[self.node_id]
        if self.advertise_address is None and own != self.listen_address:
            raise ConfigError(
                f"peers[{self.node_id}]: {own!r} differs from listen_address "
                f"{self.listen_address!r}; set advertise_address when they differ on purpose"
            )
        if self.advertise_address is not None and own != self.advertise_address:
            raise ConfigError(
                f"peers[{self.node_id}]: {own!r} differs from advertise_address "
                f"{self.advertise_address!r}"
            )
        addresses = list(self.peers.values())
        if len(set(addresses)) != len(addresses):
            raise ConfigError(f"peers: two voters share an address ({', '.join(addresses)})")

    def _check_join(self) -> None:
        for address in self.join_addresses:
            parse_address(address, "join")
        if self.join is not None and self.replication != "raft":
            raise ConfigError("join: membership changes need replication = raft")
        if type(self.join_timeout_ms) is not int or self.join_timeout_ms <= 0:
            raise ConfigError(
                f"join_timeout_ms: {self.join_timeout_ms!r} must be a positive integer"
            )

    @property
    def superusers(self) -> tuple[str, ...]:
        """The client names ``acl_superusers`` lists (none when it is unset)."""
        if self.acl_superusers is None:
            return ()
        return tuple(n.strip() for n in self.acl_superusers.split(",") if n.strip())

    @property
    def join_addresses(self) -> tuple[str, ...]:
        """The members ``join`` names (none when it is unset)."""
        if self.join is None:
            return ()
        return tuple(a.strip() for a in self.join.split(",") if a.strip())

    @property
    def controlled(self) -> bool:
        """Master-slave under a controller (failover), not static mode."""
        return self.replication == "master-slave" and self.controller_addresses is not None

    @property
    def role(self) -> str:
        """The master-slave role: ``broker_role``, or RocketMQ's reading of ``broker_id``."""
        if self.broker_role is not None:
            return self.broker_role
        return "ASYNC_MASTER" if self.broker_id == 0 else "SLAVE"

    @property
    def flush_type(self) -> str:
        """SYNC_FLUSH or ASYNC_FLUSH: ``flush_disk_type``, or what ``durability`` means."""
        return "SYNC_FLUSH" if self.durability == "fsync" else "ASYNC_FLUSH"

    @property
    def in_sync_replicas_needed(self) -> int:
        """How many replicas (master included) must hold a write before it is acknowledged."""
        if self.min_in_sync_replicas is not None:
            return self.min_in_sync_replicas
        return min(2, len(self.peers)) if self.role == "SYNC_MASTER" else 1

    def _check_ratios(self) -> None:
        names = ("disk_clean_watermark_ratio", "disk_force_clean_ratio", "disk_full_ratio")
        values = [getattr(self, name) for name in names]
        for name, value in zip(names, values, strict=True):
            if type(value) not in (int, float) or not 0.0 < value <= 1.0:
                raise ConfigError(f"{name}: {value!r} must be a number in (0, 1]")
        if not values[0] <= values[1] <= values[2]:
            raise ConfigError(
                "disk_force_clean_ratio: the ratios must satisfy disk_clean_watermark_ratio "
                f"<= disk_force_clean_ratio <= disk_full_ratio, got {values[0]}, {values[1]}, "
                f"{values[2]}"
            )

    @property
    def advertised(self) -> str:
        """The address clients and peers use for this node."""
        return self.advertise_address or self.listen_address

    @property
    def store_dir(self) -> str:
        """The MessageStore's root: ``<data_dir>/store``."""
        return os.path.join(self.data_dir, STORE_SUBDIR)

    def store_config(self) -> StoreConfig:
        """The StoreConfig this node's MessageStore opens with, rooted at ``<data_dir>/store``.

        ``durability`` "fsync" maps to SYNC_FLUSH, "write" to ASYNC_FLUSH; retention fields
        map one to one (``file_reserved_hours`` is the store's ``retention_hours``).
        """
        return StoreConfig(
            root_dir=self.store_dir,
            segment_size_bytes=self.segment_size_bytes,
            flush_mode=FlushMode.SYNC_FLUSH
            if self.durability == "fsync"
            else FlushMode.ASYNC_FLUSH,
            limits=Limits(
                max_body_bytes=self.max_body_bytes, max_properties_bytes=self.max_properties_bytes
            ),
            retention_hours=self.file_reserved_hours,
            disk_clean_watermark_ratio=float(self.disk_clean_watermark_ratio),
            disk_force_clean_ratio=float(self.disk_force_clean_ratio),
            disk_full_ratio=float(self.disk_full_ratio),
        )


def check_id(name: str, value: object) -> None:
    if not isinstance(value, str) or not _ID_PATTERN.fullmatch(value):
        raise ConfigError(f"{name}: {value!r} must be 1..64 characters from [A-Za-z0-9_-]")


__all__ = [
    "DURABILITY_MODES",
    "ENV_PREFIX",
    "LOG_LEVELS",
    "PEER_PORT_OFFSET",
    "ConfigError",
    "NodeConfig",
    "check_id",
    "derived_peer_address",
    "parse_address",
    "parse_peers",
]
