"""Finding, and if needed installing, the ``nats-server`` binaries the side-by-side bench runs.

Two versions matter (docs/PERFORMANCE.md, "The peer: NATS JetStream"):
- 2.9 from Debian 12's own package (``apt-get install nats-server``): the machine's package.
  It has no ``sync_interval``, so it only ever acknowledges before fsync.
- 2.10 from Debian 13's package, which has ``sync_interval: always`` (fsync every write on
  every node): the fair peer for raftlog's default "ack after a majority fsynced". It is
  fetched with ``apt-get download`` through a private apt state (its own lists, cache and
  sources under ``cache_dir``) pointed at the trixie suite of the machine's own Debian mirror,
  and unpacked with ``dpkg -x``: nothing is installed into the system.

Rules this module keeps:
- Idempotent: a binary already present is used as it is; nothing is fetched twice.
- Every external command has a time limit; any failure is a ``NatsUnavailable`` that says
  what was tried and why it failed, never a traceback from deep inside.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

SYSTEM_BINARY_PATHS = ("/usr/sbin/nats-server", "/usr/bin/nats-server")
APT_TIMEOUT_S = 300.0
VERSION_TIMEOUT_S = 10.0
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
TRIXIE_SUITE = "trixie"


class NatsUnavailable(RuntimeError):
    """nats-server is missing and could not be installed or fetched."""


@dataclass(frozen=True, slots=True)
class NatsBinary:
    path: str
    version: str  # e.g. "2.10.27"

    @property
    def has_sync_interval(self) -> bool:
        """2.10 added ``jetstream { sync_interval: always }``; 2.9 rejects the setting."""
        major, minor = (int(part) for part in self.version.split(".")[:2])
        return (major, minor) >= (2, 10)


def binary_version(path: str) -> str:
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise NatsUnavailable(f"{path} --version failed: {error}") from None
    found = re.search(r"v?(\d+\.\d+\.\d+)", done.stdout + done.stderr)
    if found is None:
        raise NatsUnavailable(f"{path} --version printed no version: {done.stdout!r}")
    return found.group(1)


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=APT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as error:
        raise NatsUnavailable(f"{what}: {' '.join(command)} failed: {error}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise NatsUnavailable(
            f"{what}: {' '.join(command)} exited {done.returncode}: {' | '.join(tail)}"
        )


def _system_binary() -> str | None:
    found = shutil.which("nats-server")
    if found is not None:
        return found
    return next((path for path in SYSTEM_BINARY_PATHS if os.access(path, os.X_OK)), None)


def system_nats() -> NatsBinary:
    """The machine's nats-server (Debian 12: 2.9), installed with apt-get if missing."""
    path = _system_binary()
    if path is None:
        if shutil.which("apt-get") is None:
            raise NatsUnavailable("nats-server is not installed and there is no apt-get")
        try:
            _run(["apt-get", "install", "-y", "-q", "nats-server"], "installing nats-server")
        except NatsUnavailable:
            # A fresh machine may not have package lists yet: update once and retry.
            _run(["apt-get", "update", "-q"], "updating the package lists")
            _run(["apt-get", "install", "-y", "-q", "nats-server"], "installing nats-server")
        path = _system_binary()
        if path is None:
            raise NatsUnavailable("apt-get installed nats-server but no binary is on PATH")
    return NatsBinary(path, binary_version(path))


def _debian_mirror() -> str:
    """The machine's own Debian mirror (the first non-security ``debian`` source)."""
    candidates = [*glob.glob("/etc/apt/sources.list.d/*.sources"), "/etc/apt/sources.list"]
    for source in candidates:
        try:
            with open(source, encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            continue
        for uri in re.findall(r"(?:^URIs:\s*|^deb\s+(?:\[[^]]*\]\s+)?)(\S+)", text, re.M):
            mirror = str(uri).rstrip("/")
            if mirror.endswith("/debian"):
                return mirror
    return DEFAULT_MIRROR


def trixie_nats(cache_dir: str) -> NatsBinary:
    """nats-server 2.10 from Debian 13's package, unpacked under ``cache_dir``."""
    root = os.path.abspath(cache_dir)
    unpacked = os.path.join(root, "unpacked")
    binary = os.path.join(unpacked, "usr", "sbin", "nats-server")
    if os.access(binary, os.X_OK):
        return NatsBinary(binary, binary_version(binary))
    for tool in ("apt-get", "dpkg"):
        if shutil.which(tool) is None:
            raise NatsUnavailable(f"fetching nats-server 2.10 needs {tool}, which is missing")
    state = os.path.join(root, "apt")
    for sub in (
        "lists/partial",
        "cache/archives/partial",
        "etc/sources.list.d",
        "etc/preferences.d",
        "download",
    ):
        os.makedirs(os.path.join(state, sub), exist_ok=True)
    sources = os.path.join(state, "etc", "sources.list")
    with open(sources, "w", encoding="utf-8") as out:
        out.write(f"deb [signed-by={DEBIAN_KEYRING}] {_debian_mirror()} {TRIXIE_SUITE} main\n")
    options = [
        f"-oDir::State={state}",
        f"-oDir::State::Lists={state}/lists",
        "-oDir::State::status=/dev/null",
        f"-oDir::Cache={state}/cache",
        f"-oDir::Etc::SourceList={sources}",
        f"-oDir::Etc::SourceParts={state}/etc/sources.list.d",
        f"-oDir::Etc::Preferences={state}/etc/preferences",
        f"-oDir::Etc::PreferencesParts={state}/etc/preferences.d",
        "-oAPT::Sandbox::User=root",
    ]
    _run(["apt-get", *options, "update", "-q"], "reading the trixie package lists")
    download = os.path.join(state, "download")
    try:
        done = subprocess.run(
            ["apt-get", *options, "download", "nats-server"],
            cwd=download,
            capture_output=True,
            text=True,
            timeout=APT_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise NatsUnavailable(f"apt-get download nats-server (trixie) failed: {error}") from None
    packages = sorted(glob.glob(os.path.join(download, "nats-server_*.deb")))
    if done.returncode != 0 or not packages:
        raise NatsUnavailable(
            f"apt-get download nats-server (trixie) exited {done.returncode}: "
            f"{done.stderr.strip()[-300:]}"
        )
    _run(["dpkg", "-x", packages[-1], unpacked], "unpacking nats-server 2.10")
    if not os.access(binary, os.X_OK):
        raise NatsUnavailable(f"{packages[-1]} holds no usr/sbin/nats-server")
    return NatsBinary(binary, binary_version(binary))


def best_nats(cache_dir: str, warn: list[str]) -> NatsBinary:
    """2.10 if it can be had (for the fsync-matched pairing), else the system's 2.9; why 2.10
    was not used is appended to ``warn``."""
    try:
        return trixie_nats(cache_dir)
    except NatsUnavailable as error:
        warn.append(f"nats-server 2.10 unavailable ({error}); using the system's package")
    return system_nats()
