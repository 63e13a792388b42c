"""``python -m raftlog.cli``: the same entry point as the ``raftlog`` command."""

import sys

from raftlog.cli import main

sys.exit(main())
