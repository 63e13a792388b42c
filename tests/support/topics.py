"""Topics for tests against a real cluster: create one and wait until every member knows it.

A consumer may ask any member, and a follower applies a new topic a moment after the leader
answered CreateTopic; tests that read right away wait for every member first, bounded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from raftlog.client import Admin, Connection, NotFoundError

WAIT_S = 10.0


def create_everywhere(
    servers: Connection | Sequence[str], topic: str, queue_count: int, wait_s: float = WAIT_S
) -> None:
    """Create ``topic`` (or grow it to ``queue_count``) and wait until every member of
    ``servers`` describes it; AssertionError naming the member that never did."""
    addresses = servers.addresses if isinstance(servers, Connection) else list(servers)
    with Admin(servers if isinstance(servers, Connection) else addresses) as admin:
        admin.create_topic(topic, queue_count)
        deadline = time.monotonic() + wait_s
        for address in addresses:
            while True:
                try:
                    admin.describe_topic(topic, address=address)
                    break
                except NotFoundError:
                    assert time.monotonic() < deadline, f"{address} never learned {topic}"
                    time.sleep(0.05)
