"""A producer load on a thread for failover tests: it sends while the test kills or freezes a
node, and keeps what was acknowledged, what was left with an unknown outcome (it may be
stored) and what failed, so the test can check that every acknowledged message arrives and
nothing arrives that was never sent.

A test subclasses ``BackgroundLoad`` and says what to send in ``sends``: pairs of the items a
send carries (labels the test checks deliveries against) and the send itself. The loop and
every wait are bounded (``wait_s``); ``join`` closes the producer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from raftlog.client import Producer, RaftlogError, UnknownOutcomeError
from raftlog.testing.local_cluster import LocalCluster

Item = TypeVar("Item")


class BackgroundLoad(Generic[Item]):
    """Runs ``sends`` on a thread once started; ``acked``, ``unknown`` and ``failed`` (error
    texts) fill as the sends return."""

    def __init__(self, cluster: LocalCluster, wait_s: float, name: str = "load") -> None:
        self.acked: list[Item] = []
        self.unknown: list[Item] = []
        self.failed: list[str] = []
        self.producer = Producer(cluster.addresses, timeout_s=30.0)
        self._wait_s = wait_s
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def sends(self) -> Iterator[tuple[list[Item], Callable[[], object]]]:
        """Each send: the items it carries, and the call that sends them."""
        raise NotImplementedError

    def start(self) -> BackgroundLoad[Item]:
        self._thread.start()
        return self

    def _run(self) -> None:
        for items, send in self.sends():
            try:
                send()
            except UnknownOutcomeError:
                self.unknown += items
            except RaftlogError as error:
                self.failed.append(str(error))
            else:
                self.acked += items

    def wait_for(self, count: int) -> None:
        """Until ``count`` items are acknowledged (or the sends ended)."""
        deadline = time.monotonic() + self._wait_s
        while len(self.acked) < count and self._thread.is_alive():
            assert time.monotonic() < deadline, f"{count} items not acknowledged in time"
            time.sleep(0.02)

    def join(self) -> None:
        self._thread.join(self._wait_s)
        assert not self._thread.is_alive(), "the load did not finish in time"
        self.producer.close()
