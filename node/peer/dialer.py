"""PeerDialer: how this node reaches another member's peer port -- at which address, and
over which channel (plain, or TLS that checks the member's certificate names its node id).

Every member serves clients on its client port and Raft (or the HA stream) on a separate peer
port (node/server.py). The membership (``peers``, the address book, membership changes) keeps
one address per member, its client address; a member's peer address is its entry in the
``peer_addresses`` setting, else its client address with the port plus ``PEER_PORT_OFFSET``
(node/config.py: client port 7701 -> peer port 8701).

Rules this module keeps: the derivation is the same on every node and in every tool
(LocalCluster, the chaos proxies, the manifests), so the default needs no setting; an
explicit entry always wins; every outgoing peer channel is made here, so TLS cannot be
forgotten by one caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import grpc

from raftlog.node.config import derived_peer_address

MAX_GRPC_MESSAGE_BYTES = 64 << 20
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 1000),
    ("grpc.keepalive_timeout_ms", 2000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class PeerDialer:
    """``overrides``: node id -> peer host:port for members whose peer port is not derived.
    ``credentials``: a callable giving the current TLS channel credentials (certificates may
    be rotated, so each new channel asks again), or None for plain TCP."""

    def __init__(
        self,
        overrides: Mapping[str, str] | None = None,
        credentials: Callable[[], grpc.ChannelCredentials] | None = None,
    ) -> None:
        self._overrides = dict(overrides or {})
        self._credentials = credentials

    @property
    def tls(self) -> bool:
        """Whether peers are dialled (and so must be served) over mutual TLS."""
        return self._credentials is not None

    def address_of(self, node_id: str, client_address: str) -> str:
        """Member ``node_id``'s peer address, given the client address it is known by."""
        return self._overrides.get(node_id) or derived_peer_address(client_address)

    def all_of(self, client_addresses: Mapping[str, str]) -> dict[str, str]:
        """The peer address of every member in ``client_addresses`` (node id -> host:port)."""
        return {n: self.address_of(n, a) for n, a in client_addresses.items()}

    def channel(self, node_id: str, peer_address: str) -> grpc.Channel:
        """A new channel to member ``node_id`` at ``peer_address``; with TLS, the server's
        certificate must name ``node_id`` (its node id is the name checked, not the host)."""
        if self._credentials is None:
            return grpc.insecure_channel(peer_address, options=CHANNEL_OPTIONS)
        options: list[tuple[str, int | str]] = [
            *CHANNEL_OPTIONS,
            ("grpc.ssl_target_name_override", node_id),
        ]
        return grpc.secure_channel(peer_address, self._credentials(), options=options)
