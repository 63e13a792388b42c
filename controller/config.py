"""ControllerConfig: one controller member's settings, checked when built.

Rules this module keeps:
- The member's pysyncobj port is never its gRPC port, and neither is a wildcard address
  (0.0.0.0, ::): pysyncobj unpickles what reaches it, so it listens only where its peers
  reach it, and only with a password.
- ``peers`` names every member (this one too) as id -> (raft address, gRPC address); a
  mistake is one ConfigError line naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ConfigError(ValueError):
    """A controller setting is missing or wrong; the message names the field."""


def parse_address(value: str, what: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) -> (host, port); ConfigError naming ``what``."""
    host, sep, port = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError(f"{what}: {value!r} is not host:port with a port in 1..65535")
    return host, int(port)


PASSWORD_ENV = "RAFTLOG_CONTROLLER_PASSWORD"
# A master writes for this long after it sent an answered heartbeat (less its margin).
DEFAULT_LEASE_MS = 1000
_WILDCARDS = {"0.0.0.0", "::", ""}


def parse_controller_peers(text: str) -> dict[str, tuple[str, str]]:
    """``c1=raft_host:port/grpc_host:port,c2=...`` -> {id: (raft address, gRPC address)}."""
    peers: dict[str, tuple[str, str]] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        member_id, sep, addresses = item.partition("=")
        raft, slash, grpc_address = addresses.partition("/")
        if not sep or not slash or not member_id:
            raise ConfigError(f"peers: {item!r} is not id=raft_host:port/grpc_host:port")
        if member_id in peers:
            raise ConfigError(f"peers: {member_id!r} is listed twice")
        peers[member_id.strip()] = (raft.strip(), grpc_address.strip())
    return peers


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    member_id: str
    peers: dict[str, tuple[str, str]] = field(hash=False)
    data_dir: str
    password: str = field(repr=False)
    lease_ms: int = DEFAULT_LEASE_MS

    def __post_init__(self) -> None:
        if self.member_id not in self.peers:
            raise ConfigError(f"peers: does not name this member {self.member_id!r}")
        if len(self.peers) < 3 or len(self.peers) % 2 == 0:
            raise ConfigError(
                f"peers: {len(self.peers)} members; a controller group has an odd number, 3 or more"
            )
        for member_id, (raft, grpc_address) in self.peers.items():
            raft_host, _ = parse_address(raft, f"peers[{member_id}] raft address")
            grpc_host, _ = parse_address(grpc_address, f"peers[{member_id}] gRPC address")
            if raft == grpc_address:
                raise ConfigError(f"peers[{member_id}]: the raft and gRPC ports must differ")
            if raft_host in _WILDCARDS or grpc_host in _WILDCARDS:
                raise ConfigError(
                    f"peers[{member_id}]: {raft_host or grpc_host!r} is a wildcard; name the "
                    "address peers and brokers reach (pysyncobj must not listen everywhere)"
                )
        if not self.password:
            raise ConfigError(
                f"password: required (set {PASSWORD_ENV} or --password-file): pysyncobj "
                "unpickles what it receives, so its traffic must be authenticated"
            )
        if not self.data_dir:
            raise ConfigError("data_dir: must be a non-empty path")
        if type(self.lease_ms) is not int or not 300 <= self.lease_ms <= 60_000:
            raise ConfigError(f"lease_ms: {self.lease_ms!r} must be an integer in 300..60000")

    @property
    def raft_address(self) -> str:
        return self.peers[self.member_id][0]

    @property
    def grpc_address(self) -> str:
        return self.peers[self.member_id][1]

    @property
    def other_raft_addresses(self) -> list[str]:
        return sorted(raft for m, (raft, _) in self.peers.items() if m != self.member_id)

    @property
    def grpc_address_of_raft(self) -> dict[str, str]:
        return {raft: grpc_address for raft, grpc_address in self.peers.values()}
