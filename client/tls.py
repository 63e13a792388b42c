"""ClientTls: how a client dials a TLS cluster -- the CA that signed the nodes' certificates,
and, where the client port requires one, the client's own certificate and key (PEM files).

Rules this module keeps: the files are read when the credentials are made (once per
Connection); a node's certificate must name the host the client dials (its address, or
``server_name`` when given: e.g. the node id when dialling through a proxy).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import grpc

ENV_CA = "RAFTLOG_TLS_CA"
ENV_CERT = "RAFTLOG_TLS_CERT"
ENV_KEY = "RAFTLOG_TLS_KEY"


@dataclass(frozen=True, slots=True)
class ClientTls:
    ca_file: str
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("tls: give both a client certificate and its key, or neither")

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ClientTls | None:
        """From RAFTLOG_TLS_CA (and RAFTLOG_TLS_CERT, RAFTLOG_TLS_KEY); None when unset."""
        ca = env.get(ENV_CA)
        if not ca:
            return None
        return cls(ca, env.get(ENV_CERT) or None, env.get(ENV_KEY) or None)

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path: str | None) -> bytes | None:
            if path is None:
                return None
            with open(path, "rb") as handle:
                return handle.read()

        return grpc.ssl_channel_credentials(
            root_certificates=read(self.ca_file),
            private_key=read(self.key_file),
            certificate_chain=read(self.cert_file),
        )

    def channel_options(self) -> list[tuple[str, str]]:
        if self.server_name is None:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]
