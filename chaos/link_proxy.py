"""Userspace TCP proxies between local nodes, so the local chaos target can partition the
cluster without netem or iptables (the kernel here has neither to offer an unprivileged run).

:class:`LinkProxy` is one directed link "a -> b": it listens on 127.0.0.1 and forwards every
connection node a opens to node b's real address. Node a is started with b's entry in its
``--peers`` pointing at this proxy, so everything a sends to b (its Raft stream, segment
fetches) crosses it, while b's own messages to a cross the proxy "b -> a". A link is in one of
three modes:

* ``pass``: bytes are forwarded both ways;
* ``drop``: open connections are closed and new ones are accepted and closed at once (a
  refused, noisy failure: the sender learns quickly);
* ``blackhole``: connections stay open and new ones are accepted, but no byte is read or
  forwarded (a silent stall: the sender only learns through its keepalive timeouts). On
  ``pass`` again, the bytes waiting in the kernel flow on, in order, as after a long delay;
* ``delay``: bytes are forwarded both ways, each read held ``delay_ms`` first (a slow link:
  what arrives while a read is held waits in the kernel and goes with the next read, so a
  byte is delayed by ``delay_ms`` to twice that, and order is kept).

:class:`ProxyMesh` holds one proxy per ordered pair of nodes and gives each node its peers map
(its own entry stays its real address, as node/config.py requires; the others are proxies).
Nodes talk Raft (or the HA stream) on their peer ports, so each link has a twin proxy to the
destination's peer port (``peer_addresses_for`` gives a node's ``--peer-addresses`` map);
a link and its twin are always in the same mode, so a partition cuts both.
It may also hold one proxy from each node to each of a few services the nodes dial but that
never dial them (a master-slave group's controller members): link "n1->c2" carries n1's calls
to controller member c2, so a partition can cut a master off from its controller. And it
holds one proxy from the clients to each node (link "client->n1"): a client that dials through
:meth:`ProxyMesh.client_address_map` can be cut off from one node while the nodes still talk.

Rules this module keeps: listens on 127.0.0.1 only; never rewrites or reorders bytes (a stream
is forwarded whole or not at all, so HTTP/2 framing is never corrupted); every wait is at most
``_WAIT_S`` so a closing proxy is noticed quickly, and ``close`` closes every socket it opened
and joins its threads with a bound.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Collection, Mapping
from typing import Literal, TypeAlias

HOST = "127.0.0.1"
Mode: TypeAlias = Literal["pass", "drop", "blackhole", "delay"]
MODES: tuple[Mode, ...] = ("pass", "drop", "blackhole", "delay")
_WAIT_S = 0.1
_CHUNK_BYTES = 256 * 1024
_CONNECT_TIMEOUT_S = 2.0
_JOIN_TIMEOUT_S = 2.0
_MAX_DELAY_MS = 10_000
# The source name of the links that carry the clients' calls to each node.
CLIENT = "client"


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class _Connection:
    """One proxied connection: the accepted socket and the one to the upstream."""

    def __init__(self, downstream: socket.socket, upstream: socket.socket) -> None:
        self.downstream = downstream
        self.upstream = upstream
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()
        for sock in (self.downstream, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class LinkProxy:
    """The directed link ``name`` (e.g. "n1->n2") to ``upstream`` ("host:port")."""

    def __init__(self, name: str, upstream: str, *, avoid_ports: Collection[int] = ()) -> None:
        self.name = name
        self.upstream = upstream
        self._mode: Mode = "pass"
        self._delay_s = 0.0
        self._lock = threading.Lock()
        self._connections: list[_Connection] = []
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()
        self._listener = self._bind(avoid_ports)
        self.port = int(self._listener.getsockname()[1])
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"proxy-{name}", daemon=True
        )
        self._acceptor.start()

    @staticmethod
    def _bind(avoid_ports: Collection[int]) -> socket.socket:
        # The nodes' ports were picked free but are not bound until the nodes start: never
        # take one of them.
        for _ in range(100):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((HOST, 0))
            if int(listener.getsockname()[1]) not in avoid_ports:
                listener.listen(64)
                listener.settimeout(_WAIT_S)
                return listener
            listener.close()
        raise OSError("no free port for a link proxy")

    @property
    def address(self) -> str:
        """Where the link's sender connects: ``127.0.0.1:<port>``."""
        return f"{HOST}:{self.port}"

    @property
    def mode(self) -> Mode:
        with self._lock:
            return self._mode

    def set_mode(self, mode: Mode, delay_ms: int = 0) -> None:
        """Switch the link to ``mode``; ``drop`` closes the open connections at once;
        ``delay`` holds each read ``delay_ms`` (0 to 10,000)."""
        if mode not in MODES:
            raise ValueError(f"unknown link mode {mode!r}")
        if not 0 <= delay_ms <= _MAX_DELAY_MS:
            raise ValueError(f"delay_ms {delay_ms} is outside 0..{_MAX_DELAY_MS}")
        with self._lock:
            self._mode = mode
            self._delay_s = delay_ms / 1000 if mode == "delay" else 0.0
            doomed = list(self._connections) if mode == "drop" else []
        for connection in doomed:
            connection.close()

    def close(self) -> None:
        """Stop accepting, close every connection, join the threads (bounded)."""
        self._closing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
            threads = [self._acceptor, *self._threads]
        for connection in connections:
            connection.close()
        deadline = time.monotonic() + _JOIN_TIMEOUT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- forwarding ------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        # Ends when close() closes the listener; each accept waits at most _WAIT_S.
        while not self._closing.is_set():
            try:
                downstream, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.mode == "drop":
                downstream.close()  # refused: the sender sees the connection end at once
                continue
            try:
                upstream = socket.create_connection(
                    _split(self.upstream), timeout=_CONNECT_TIMEOUT_S
                )
            except OSError:
                downstream.close()  # the node is down: so is the link
                continue
            for sock in (downstream, upstream):
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = _Connection(downstream, upstream)
            pumps = [
                threading.Thread(
                    target=self._pump,
                    args=(connection, source, sink),
                    name=f"proxy-{self.name}-pump",
                    daemon=True,
                )
                for source, sink in ((downstream, upstream), (upstream, downstream))
            ]
            with self._lock:
                self._connections.append(connection)
                self._threads = [t for t in self._threads if t.is_alive()] + pumps
            for pump in pumps:
                pump.start()

    def _pump(self, connection: _Connection, source: socket.socket, sink: socket.socket) -> None:
        # Ends when either side closes, the link drops, or the proxy closes; each wait is at
        # most _WAIT_S. A blackholed link reads nothing, so the bytes wait in the kernel.
        try:
            while not connection.closed.is_set() and not self._closing.is_set():
                readable, _, _ = select.select([source], [], [], _WAIT_S)
                # The mode is read after the wait: a link blackholed during it forwards
                # nothing more, and what arrived stays in the kernel.
                if self.mode == "blackhole":
                    connection.closed.wait(_WAIT_S)
                    continue
                if not readable:
                    continue
                data = source.recv(_CHUNK_BYTES)
                if not data:
                    break
                delay_s = self._delay_s
                if delay_s and connection.closed.wait(delay_s):
                    break
                sink.sendall(data)
        except (OSError, ValueError):
            pass  # a socket closed under us: the connection is over
        finally:
            connection.close()
            with self._lock:
                if connection in self._connections:
                    self._connections.remove(connection)


class ProxyMesh:
    """One :class:`LinkProxy` per ordered pair of ``addresses`` (node id -> real address), one
    from each node to each of ``services`` (service id -> real address), and one from
    :data:`CLIENT` to each node."""

    def __init__(
        self,
        addresses: Mapping[str, str],
        services: Mapping[str, str] | None = None,
        peer_addresses: Mapping[str, str] | None = None,
    ) -> None:
        self.addresses = dict(addresses)
        self.services = dict(services or {})
        self.peer_addresses = dict(peer_addresses or {})
        avoid = {
            _split(a)[1]
            for a in (
                *self.addresses.values(),
                *self.services.values(),
                *self.peer_addresses.values(),
            )
        }
        self.links: dict[tuple[str, str], LinkProxy] = {}
        # The twin of link (a, b) to b's peer port.
        self.peer_links: dict[tuple[str, str], LinkProxy] = {}
        try:
            for source in self.addresses:
                for destination, address in (*self.addresses.items(), *self.services.items()):
                    if source != destination:
                        self.links[(source, destination)] = LinkProxy(
                            f"{source}->{destination}", address, avoid_ports=avoid
                        )
                for destination, address in self.peer_addresses.items():
                    if source != destination:
                        self.peer_links[(source, destination)] = LinkProxy(
                            f"{source}->{destination} (peer port)", address, avoid_ports=avoid
                        )
            for destination, address in self.addresses.items():
                self.links[(CLIENT, destination)] = LinkProxy(
                    f"{CLIENT}->{destination}", address, avoid_ports=avoid
                )
        except BaseException:
            self.close()
            raise

    def peers_for(self, node_id: str) -> dict[str, str]:
        """``node_id``'s peers map: its own real address, and a proxy for each other node."""
        return {
            other: address if other == node_id else self.links[(node_id, other)].address
            for other, address in self.addresses.items()
        }

    def peer_addresses_for(self, node_id: str) -> dict[str, str]:
        """``node_id``'s peer address map: a proxy to each other node's peer port."""
        return {
            other: proxy.address
            for (source, other), proxy in self.peer_links.items()
            if source == node_id
        }

    def services_for(self, node_id: str) -> list[str]:
        """The proxies ``node_id`` dials the services through, in ``services`` order."""
        return [self.links[(node_id, service)].address for service in self.services]

    def client_address_map(self) -> dict[str, str]:
        """For a client's ``Connection(address_map=...)``: every address a client may be told
        of a node (its real one, or a redirect naming another node's proxy to it) is dialed
        through that node's client link, so cutting the link cuts the client off."""
        mapping: dict[str, str] = {}
        for (source, destination), proxy in self.links.items():
            if destination in self.addresses and source != CLIENT:
                mapping[proxy.address] = self.links[(CLIENT, destination)].address
        for node_id, address in self.addresses.items():
            mapping[address] = self.links[(CLIENT, node_id)].address
        return mapping

    def block(self, links: Collection[tuple[str, str]], mode: Mode, delay_ms: int = 0) -> None:
        """Put exactly ``links`` in ``mode`` (with ``delay_ms`` for ``delay``) and every other
        link back to ``pass``."""
        for key, proxy in self._all_proxies():
            if key in links:
                proxy.set_mode(mode, delay_ms)
            else:
                proxy.set_mode("pass")

    def heal(self) -> None:
        """Every link back to ``pass``."""
        for _, proxy in self._all_proxies():
            proxy.set_mode("pass")

    def _all_proxies(self) -> list[tuple[tuple[str, str], LinkProxy]]:
        """Every link and every twin, by the link they belong to."""
        return [*self.links.items(), *self.peer_links.items()]

    def close(self) -> None:
        for _, proxy in self._all_proxies():
            proxy.close()
