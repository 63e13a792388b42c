"""A TLS node's client port as far as a health probe sees it, for the tests of the probes
(tests/unit/test_cli_health.py, tests/unit/deploy): grpc.health.v1 answering SERVING for the
whole server over TLS, with a certificate from a development CA (testing/dev_ca.py), and
client certificates required or not.

Rules it keeps: it listens on 127.0.0.1 at a port the OS picks, and stops when the ``with``
block ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


@contextmanager
def tls_health_server(directory: Path, name: str, *, client_auth: bool) -> Iterator[int]:
    """Serve health with ``directory``'s ``<name>.pem``/``<name>.key``, trusting its
    ``ca.pem`` for client certificates (required with ``client_auth``); yields the port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    credentials = grpc.ssl_server_credentials(
        [((directory / f"{name}.key").read_bytes(), (directory / f"{name}.pem").read_bytes())],
        root_certificates=(directory / "ca.pem").read_bytes(),
        require_client_auth=client_auth,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        yield port
    finally:
        server.stop(0)
