"""The userspace link proxy against a local echo server: bytes pass both ways; ``drop``
closes open connections and refuses new ones; ``blackhole`` keeps connections open but
forwards nothing until healed, then delivers what waited, in order; ``delay`` forwards every
read late, in order; a mesh gives each node its own real address and proxies for the
others."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from raftlog.chaos.link_proxy import LinkProxy, ProxyMesh


@pytest.fixture
def echo_address() -> Iterator[str]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while not stop.is_set():
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    server.close()
    thread.join(2)


def _connect(proxy: LinkProxy) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    client.settimeout(1.0)
    return client


def test_pass_forwards_both_ways(echo_address: str) -> None:
    proxy = LinkProxy("a->b", echo_address)
    try:
        with _connect(proxy) as client:
            client.sendall(b"hello")
            assert client.recv(100) == b"hello"
    finally:
        proxy.close()


def test_drop_closes_and_refuses(echo_address: str) -> None:
    proxy = LinkProxy("a->b", echo_address)
    try:
        with _connect(proxy) as client:
            client.sendall(b"x")
            assert client.recv(10) == b"x"
            proxy.set_mode("drop")
            with contextlib.suppress(OSError):
                assert client.recv(10) == b""  # closed under it
        with _connect(proxy) as client, contextlib.suppress(OSError):
            client.sendall(b"y")
            assert client.recv(10) == b""  # accepted and closed at once
        proxy.set_mode("pass")
        with _connect(proxy) as client:
            client.sendall(b"z")
            assert client.recv(10) == b"z"
    finally:
        proxy.close()


def test_blackhole_stalls_then_delivers_in_order(echo_address: str) -> None:
    proxy = LinkProxy("a->b", echo_address)
    try:
        with _connect(proxy) as client:
            proxy.set_mode("blackhole")
            client.sendall(b"one,")
            client.sendall(b"two")
            client.settimeout(0.5)
            with pytest.raises(TimeoutError):
                client.recv(10)
            proxy.set_mode("pass")
            client.settimeout(2.0)
            received = b""
            for _ in range(10):
                received += client.recv(10)
                if received == b"one,two":
                    break
            assert received == b"one,two"
    finally:
        proxy.close()


def _echo_round_trip_s(client: socket.socket, payload: bytes) -> float:
    started = time.monotonic()
    client.sendall(payload)
    received = b""
    for _ in range(100):
        received += client.recv(4096)
        if len(received) >= len(payload):
            break
    assert received == payload
    return time.monotonic() - started


def test_delay_slows_each_direction_and_keeps_order(echo_address: str) -> None:
    proxy = LinkProxy("a->b", echo_address)
    try:
        with _connect(proxy) as client:
            fast_s = _echo_round_trip_s(client, b"warm")
            proxy.set_mode("delay", 150)
            # Both directions of the link are held: at least two delays per round trip.
            slow_s = _echo_round_trip_s(client, b"one,two,three")
            proxy.set_mode("pass")
            healed_s = _echo_round_trip_s(client, b"back")
        assert slow_s >= 0.3, slow_s
        assert fast_s < 0.15 and healed_s < 0.15, (fast_s, healed_s)
    finally:
        proxy.close()


def test_a_delay_out_of_range_is_refused(echo_address: str) -> None:
    proxy = LinkProxy("a->b", echo_address)
    try:
        with pytest.raises(ValueError, match="outside"):
            proxy.set_mode("delay", -1)
        with pytest.raises(ValueError, match="outside"):
            proxy.set_mode("delay", 10_001)
        assert proxy.mode == "pass"
    finally:
        proxy.close()


def test_mesh_peers_keep_each_node_real_address() -> None:
    addresses = {"n1": "127.0.0.1:1", "n2": "127.0.0.1:2", "n3": "127.0.0.1:3"}
    mesh = ProxyMesh(addresses)
    try:
        peers = mesh.peers_for("n2")
        assert peers["n2"] == "127.0.0.1:2"
        assert peers["n1"] == mesh.links[("n2", "n1")].address
        assert peers["n3"] == mesh.links[("n2", "n3")].address
        assert len(set(peers.values())) == 3
        assert len(mesh.links) == 9  # 6 between nodes, 3 from the clients
        mesh.block({("n1", "n2")}, "blackhole")
        assert mesh.links[("n1", "n2")].mode == "blackhole"
        assert mesh.links[("n2", "n1")].mode == "pass"
        mesh.heal()
        assert {p.mode for p in mesh.links.values()} == {"pass"}
    finally:
        mesh.close()


def test_clients_dial_every_address_of_a_node_through_its_client_link() -> None:
    addresses = {"n1": "127.0.0.1:1", "n2": "127.0.0.1:2"}
    mesh = ProxyMesh(addresses, {"c1": "127.0.0.1:9"})
    try:
        mapping = mesh.client_address_map()
        to_n1 = mesh.links[("client", "n1")].address
        # The real address, and n2's proxy to n1 (named by a redirect from n2), both go
        # through the client link, so cutting it cuts the client off from n1 alone.
        assert mapping["127.0.0.1:1"] == to_n1
        assert mapping[mesh.links[("n2", "n1")].address] == to_n1
        assert mapping["127.0.0.1:2"] == mesh.links[("client", "n2")].address
        assert mesh.links[("n1", "c1")].address not in mapping  # no client dials a controller
    finally:
        mesh.close()
