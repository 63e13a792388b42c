"""A development certificate authority: makes the CA, node certificates and client
certificates a TLS cluster needs (`raftlog certs init|issue`, LocalCluster's ``tls``).

Files in one directory: ``ca.pem``/``ca.key``, then ``<name>.pem``/``<name>.key`` per issued
certificate. A node's certificate names its node id as common name and DNS alternative name
(what a peer's identity is checked against, node/security/tls.py), plus the hosts it serves
under (default: localhost and 127.0.0.1); a client's names the client.

Rules this module keeps: keys are EC P-256 and written 0600; the CA signs only; certificates
are valid from an hour ago (clock skew) for ``valid_days``; with ``overwrite=False`` nothing is
written when either file of the pair exists (FileExistsError); for development and tests --
production certificates come from the operator's own CA (docs/security.md).

It lives in raftlog.testing, not in a package of its own: the CLI (the top layer) may import
it, and its users are `raftlog certs`, LocalCluster and tests.
"""

from __future__ import annotations

import datetime
import errno
import ipaddress
import os
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "ca"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")
_SKEW = datetime.timedelta(hours=1)


def _write(path: str, data: bytes, private: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path + ".tmp", flags, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    # Replaced whole: a node reloading mid-write never reads half a file.
    os.replace(path + ".tmp", path)


def paths(directory: str, name: str) -> tuple[str, str]:
    """(certificate path, key path) of ``name`` in ``directory``."""
    return os.path.join(directory, f"{name}.pem"), os.path.join(directory, f"{name}.key")


def _refuse_existing(directory: str, name: str) -> None:
    for path in paths(directory, name):
        if os.path.exists(path):
            raise FileExistsError(errno.EEXIST, "exists (not replaced)", path)


def _save(
    directory: str, name: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate
) -> None:
    cert_path, key_path = paths(directory, name)
    _write(
        key_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        private=True,
    )
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), False)


def _builder(subject: str, issuer: x509.Name, valid_days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + datetime.timedelta(days=valid_days))
    )


def init_ca(
    directory: str,
    name: str = "raftlog development CA",
    valid_days: int = 3650,
    *,
    overwrite: bool = True,
) -> str:
    """Make ``ca.pem``/``ca.key`` in ``directory``; returns the CA certificate's path."""
    os.makedirs(directory, exist_ok=True)
    if not overwrite:
        _refuse_existing(directory, CA_NAME)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        _builder(name, subject, valid_days)
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    _save(directory, CA_NAME, key, cert)
    return paths(directory, CA_NAME)[0]


def _load_ca(directory: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    cert_path, key_path = paths(directory, CA_NAME)
    with open(key_path, "rb") as handle:
        key = serialization.load_pem_private_key(handle.read(), None)
    with open(cert_path, "rb") as handle:
        cert = x509.load_pem_x509_certificate(handle.read())
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key, cert


def _alternative_names(name: str, hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName(name)]
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def issue(
    directory: str,
    name: str,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    *,
    file_name: str | None = None,
    valid_days: int = 365,
    overwrite: bool = True,
) -> tuple[str, str]:
    """Issue a certificate for node id or client ``name`` (also usable as a TLS server on
    ``hosts``), signed by the CA in ``directory``; returns (certificate path, key path)."""
    stem = file_name or name
    if not overwrite:
        _refuse_existing(directory, stem)
    ca_key, ca_cert = _load_ca(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    cert = (
        _builder(name, ca_cert.subject, valid_days)
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(_alternative_names(name, hosts)), False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _save(directory, stem, key, cert)
    return paths(directory, stem)
