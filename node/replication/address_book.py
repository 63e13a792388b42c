"""AddressBook: where each member of the Raft group is reached, and which cluster this data
belongs to -- persisted beside the Raft log so a restarted node dials the current members, not
just the ones its ``--peers`` named at the start.

The Raft core knows members by id only (its membership is in the log: the snapshot point's
plus the CONF_CHANGE entries after it). Addresses travel in the same entries
(``ConfChange.context``), and this book is what every replica learns from them when it applies
one. It is bootstrapped from ``--peers`` (a node of the founding cluster) or from the member
list a joining node got from the cluster (join.py).

File: ``<root>/raftstate/members.json``, a JSON document (store.atomic_file, replaced whole):
``{"version": 1, "cluster_id": ..., "addresses": {node_id: "host:port"}}``.

Rules this module keeps:
- Mutated only on the Raft loop (applying entries) or before it starts; ``addresses`` is one
  dict, changed in place, which the replica's settings share, so readers on other threads
  only ever ``get`` from it (never iterate it).
- Every change is on disk before ``apply`` returns (the entry is applied again after a crash
  anyway: a node re-applies committed entries from its snapshot point on restart).
- A data dir of another cluster is refused (ClusterMismatchError) before anything runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from raftlog.node.config import ConfigError
from raftlog.raft.types import ConfChange, ConfChangeType, ConfState
from raftlog.store.atomic_file import read_json_document, write_json_document
from raftlog.store.filesystem import FileSystem

_log = logging.getLogger(__name__)
ADDRESS_BOOK_FILE_NAME = "members.json"
_VERSION = 1


class ClusterMismatchError(ConfigError):
    """The data dir belongs to another cluster than the one this node is configured for."""


def address_book_path(root_dir: str) -> str:
    return os.path.join(root_dir, "raftstate", ADDRESS_BOOK_FILE_NAME)


class AddressBook:
    def __init__(self, fs: FileSystem, path: str, cluster_id: str, own_id: str) -> None:
        self._fs = fs
        self._path = path
        self.cluster_id = cluster_id
        self.own_id = own_id
        self.addresses: dict[str, str] = {}

    @classmethod
    def open(
        cls, fs: FileSystem, root_dir: str, cluster_id: str, own_id: str
    ) -> AddressBook | None:
        """The book in ``root_dir``, or None when there is none yet (fresh data)."""
        book = cls(fs, address_book_path(root_dir), cluster_id, own_id)
        try:
            document = read_json_document(fs, book._path, _VERSION)
        except ValueError as error:
            raise ConfigError(f"data_dir: {error}") from None
        if document is None:
            return None
        stored_cluster_id = str(document.get("cluster_id", ""))
        if stored_cluster_id != cluster_id:
            raise ClusterMismatchError(
                f"cluster_id: this data dir belongs to cluster {stored_cluster_id!r}, not "
                f"{cluster_id!r}; use the data dir's cluster id, or an empty data dir"
            )
        book.addresses.update({str(k): str(v) for k, v in document["addresses"].items()})
        return book

    @classmethod
    def create(
        cls,
        fs: FileSystem,
        root_dir: str,
        cluster_id: str,
        own_id: str,
        addresses: Mapping[str, str],
    ) -> AddressBook:
        fs.makedirs(os.path.dirname(address_book_path(root_dir)))
        book = cls(fs, address_book_path(root_dir), cluster_id, own_id)
        book.addresses.update(addresses)
        book.save()
        return book

    def save(self) -> None:
        write_json_document(
            self._fs,
            self._path,
            _VERSION,
            {"cluster_id": self.cluster_id, "addresses": dict(sorted(self.addresses.items()))},
        )

    def apply(self, changes: Sequence[ConfChange], conf_state: ConfState) -> bool:
        """Learn from applied membership changes (``conf_state``: the membership after the
        last of them, or after an installed snapshot when there are none); True when the book
        changed."""
        before = dict(self.addresses)
        for change in changes:
            address = change.context.decode("utf-8", "replace")
            if change.type != ConfChangeType.REMOVE_NODE and address:
                self.addresses[change.node_id] = address
        members = set(conf_state.voters) | set(conf_state.learners) | {self.own_id}
        for node_id in sorted(self.addresses):
            if node_id not in members:
                del self.addresses[node_id]
        unknown = sorted(members - set(self.addresses))
        if unknown:
            # Possible only when the entries that named them were compacted away while this
            # node was gone; `member add` them again or restart this node with --join.
            _log.warning("no address known for member(s) %s", ", ".join(unknown))
        if self.addresses == before:
            return False
        self.save()
        _log.info("members now %s", ", ".join(f"{k}={v}" for k, v in self.addresses.items()))
        return True

    def peers(self) -> dict[str, str]:
        """Every member but this node, by id."""
        return {k: v for k, v in self.addresses.items() if k != self.own_id}
