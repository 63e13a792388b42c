"""NodeTls: a node's TLS credentials -- the client port's and the peer port's server side, and
the peer channels it dials -- read from PEM files that may be replaced while it runs.

Both ports present the node's certificate (``tls_cert_file``/``tls_key_file``). The peer port
requires a client certificate signed by ``tls_ca_file`` (mTLS), and a peer's certificate must
name the node id it speaks for (its common name or a DNS subject alternative name): the peer
service checks that against the sender of every Raft message. The client port requires a
client certificate only with ``tls_client_auth_enable``.

Rules this module keeps: certificates reload without a restart -- gRPC asks the fetcher at
each new handshake, and the fetcher re-reads the files when one of their modification times
changed (connections already open keep their session); a half-written or unreadable set is
logged once and the previous one stays in use; dialled peer channels read the files anew
for each channel.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

import grpc

from raftlog.node.config import NodeConfig

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca_file: str
    cert_file: str
    key_file: str

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(CA, certificate chain, private key), PEM."""
        return tuple(_read(path) for path in (self.ca_file, self.cert_file, self.key_file))  # type: ignore[return-value]

    def stamp(self) -> tuple[float, ...]:
        """The files' modification times: a change means "read them again"."""
        return tuple(os.stat(p).st_mtime_ns for p in (self.ca_file, self.cert_file, self.key_file))


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


class _ReloadingConfig:
    """The certificate configuration fetcher of one server (one per port)."""

    def __init__(self, files: TlsFiles, require_client_auth: bool) -> None:
        self._files = files
        self._require_client_auth = require_client_auth
        self._lock = threading.Lock()
        self._stamp = files.stamp()
        self.initial = self._configuration()

    def _configuration(self) -> grpc.ServerCertificateConfiguration:
        ca, chain, key = self._files.read()
        return grpc.ssl_server_certificate_configuration(
            [(key, chain)], root_certificates=ca if self._require_client_auth else None
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC before each handshake: a new configuration, or None (keep it)."""
        with self._lock:
            try:
                stamp = self._files.stamp()
                if stamp == self._stamp:
                    return None
                configuration = self._configuration()
            except (OSError, ValueError, RuntimeError) as error:
                _log.warning("TLS files not reloaded (the previous ones stay): %s", error)
                return None
            self._stamp = stamp
            _log.info("TLS certificate reloaded from %s", self._files.cert_file)
            return configuration

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self.initial, self.fetch, require_client_authentication=self._require_client_auth
        )


class NodeTls:
    def __init__(self, files: TlsFiles, client_auth: bool) -> None:
        self._files = files
        self._client_port = _ReloadingConfig(files, client_auth)
        self._peer_port = _ReloadingConfig(files, True)

    def client_port_credentials(self) -> grpc.ServerCredentials:
        return self._client_port.credentials()

    def peer_port_credentials(self) -> grpc.ServerCredentials:
        return self._peer_port.credentials()

    def peer_channel_credentials(self) -> grpc.ChannelCredentials:
        """For dialling another member's peer port: trust the CA, present this node's cert."""
        ca, chain, key = self._files.read()
        return grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=key, certificate_chain=chain
        )


def certificate_names(context: grpc.ServicerContext) -> frozenset[str]:
    """The names the caller's verified certificate carries (common name, DNS alternative
    names); empty without a client certificate."""
    auth = context.auth_context()
    names: set[str] = set()
    for key in ("x509_common_name", "x509_subject_alternative_name"):
        names.update(value.decode("utf-8", "replace") for value in auth.get(key, ()))
    return frozenset(names)


def node_tls(config: NodeConfig) -> NodeTls | None:
    """The node's TLS credentials, or None when it is configured without TLS."""
    if not config.tls_enabled:
        return None
    assert config.tls_ca_file and config.tls_cert_file and config.tls_key_file
    files = TlsFiles(config.tls_ca_file, config.tls_cert_file, config.tls_key_file)
    return NodeTls(files, config.tls_client_auth_enable)
