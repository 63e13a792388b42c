"""MetricsEndpoint: the HTTP server that serves a registry in Prometheus' text format on the
node's metrics port (``metrics_listen``), apart from the gRPC port.

Rules this module keeps: the port is bound when the endpoint is built, so a bad or taken
address fails the node's start-up with a one-line OSError naming ``metrics_listen`` before
anything runs; it serves from ``start`` to ``stop`` on daemon threads and logs no request
(every scrape would be a log line); ``url`` is what others can dial: a wildcard host is
replaced by the node's advertised host, port 0 by the port the OS chose.
"""

from __future__ import annotations

import socket
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from raftlog.node.config import parse_address

_WILDCARD_HOSTS = ("0.0.0.0", "::")


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing: Prometheus scrapes every few seconds."""


def _server_class(host: str, port: int) -> type[ThreadingWSGIServer]:
    """ThreadingWSGIServer for the address family ``host`` resolves to (IPv4 or IPv6)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})


class MetricsEndpoint:
    def __init__(self, listen: str, registry: CollectorRegistry, advertised_host: str) -> None:
        host, port = parse_address(listen, "metrics_listen", min_port=0)
        try:
            self._server = make_server(
                host,
                port,
                make_wsgi_app(registry),
                _server_class(host, port),
                handler_class=_QuietHandler,
            )
        except OSError as error:
            reason = error.strerror or str(error)
            raise OSError(f"metrics_listen: cannot listen on {listen}: {reason}") from None
        shown = advertised_host if host in _WILDCARD_HOSTS else host
        shown = f"[{shown}]" if ":" in shown else shown
        self.url = f"http://{shown}:{self._server.server_port}/metrics"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
