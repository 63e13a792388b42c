"""raftlog: a Raft-replicated distributed commit log with a RocketMQ-style store.

The import root. In a source checkout, ``raftlog/<pkg>`` are symlinks to the top-level
folders (``store/``, ``raft/``, ...) so tools that walk the file system (mypy, pytest,
import-linter) see the same tree an installed wheel has; an installed wheel gets the same
mapping through setuptools ``package-dir`` in pyproject.toml.
"""

__version__ = "0.1.0"
