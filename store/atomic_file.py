"""Whole-file replacement that survives a crash at any point: old content or new, never half.

Rules this module keeps:
- Write a temporary sibling, fsync it, rename it over the target, then fsync the directory:
  the rename is the commit point and the directory fsync makes it durable.
- All I/O goes through the ``FileSystem`` seam.
- A leftover temporary file from a crash is harmless: it is overwritten on the next write and
  never read.
"""

from __future__ import annotations

import json
import os
from typing import Any

from raftlog.store.filesystem import FileSystem

_TEMP_SUFFIX = ".tmp"


def write_atomically(fs: FileSystem, path: str, data: bytes) -> None:
    """Replace ``path``'s content by ``data`` durably and atomically."""
    directory = os.path.dirname(path) or "."
    fs.makedirs(directory)
    temp_path = path + _TEMP_SUFFIX
    handle = fs.open(temp_path, create=True)
    try:
        # Truncate first: a leftover temporary file may be longer than ``data``.
        handle.truncate(0)
        handle.pwrite(data, 0)
        handle.sync()
    finally:
        handle.close()
    fs.rename(temp_path, path)
    fs.sync_dir(directory)


def read_file(fs: FileSystem, path: str) -> bytes | None:
    """The whole content of ``path``, or None when it does not exist."""
    if not fs.exists(path):
        return None
    handle = fs.open(path, create=False)
    try:
        return handle.pread(handle.size(), 0)
    finally:
        handle.close()


def write_json_document(fs: FileSystem, path: str, version: int, body: dict[str, Any]) -> None:
    """Replace ``path`` atomically by a JSON document ``{"version": version, **body}``."""
    document = {"version": version, **body}
    write_atomically(fs, path, json.dumps(document, sort_keys=True).encode())


def read_json_document(fs: FileSystem, path: str, version: int) -> dict[str, Any] | None:
    """The JSON document at ``path`` (None when absent); ValueError naming the path when it is
    not JSON or carries another format version."""
    raw = read_file(fs, path)
    if raw is None:
        return None
    try:
        document = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"{path}: not a valid JSON document: {error}") from error
    if not isinstance(document, dict) or document.get("version") != version:
        found = document.get("version") if isinstance(document, dict) else None
        raise ValueError(f"{path}: unknown format version {found!r}")
    checked: dict[str, Any] = document
    return checked
