"""The Raft core benchmark: entries per second through a 3-node cluster, core alone.

Run by hand (it is not a timed test): ``python -m raftlog.bench.raft [--quick] [--json PATH]``.
It prints a table; ``--json`` writes every measurement with its parameters so runs can be
compared.

Rules this module keeps:
- Only the core is measured: three RawNodes on MemoryStorage, one in-process message pump
  (FIFO, no faults, no ticks), the Ready contract followed exactly (persist -> send -> apply ->
  advance). No disk, no network, no encoding: this is the ceiling the core puts on raftlog.
- A round proposes ``batch_size`` entries on the leader, then pumps until every node has
  applied them; entries/s counts entries applied on all three nodes per second of wall time.
- Every loop is bounded by an entry count AND a time budget; the pump is also bounded by a
  step count per round, so a core that never quiesces ends the run with an error.
- Each measurement is repeated (``--repeats``, a fresh cluster each time) and the median
  reported: the machine's two cores are shared, and one busy neighbour skews a single run.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import deque
from dataclasses import dataclass, field

from raftlog.bench.report import Budget, run_bounded, write_json_report
from raftlog.raft.config import Config
from raftlog.raft.memory_storage import MemoryStorage
from raftlog.raft.raw_node import RawNode
from raftlog.raft.types import ConfState, Message, NodeId, Role

NODE_IDS: tuple[NodeId, ...] = ("n1", "n2", "n3")
BATCH_SIZES = (1, 16, 256)
ENTRY_BYTES = 100
PUMP_STEPS_MAX = 1_000_000
"""Messages and Readies handled in one pump before it is declared stuck."""
ELECTION_ROUNDS_MAX = 100


@dataclass(slots=True)
class Measurement:
    workload: str
    params: dict[str, object]
    entries: int
    seconds: float
    entries_per_s: float = field(init=False)
    us_per_entry: float = field(init=False)

    def __post_init__(self) -> None:
        self.entries_per_s = self.entries / self.seconds if self.seconds > 0 else 0.0
        self.us_per_entry = self.seconds * 1e6 / self.entries if self.entries else 0.0


class PumpedCluster:
    """Three cores wired by a FIFO queue; the application side of each is an applied count."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        conf_state = ConfState(voters=NODE_IDS)
        self.storages = {node_id: MemoryStorage(conf_state) for node_id in NODE_IDS}
        self.nodes = {
            node_id: RawNode(
                Config(node_id=node_id), self.storages[node_id], random.Random(rng.getrandbits(64))
            )
            for node_id in NODE_IDS
        }
        self.applied_index = dict.fromkeys(NODE_IDS, 0)
        self._queue: deque[Message] = deque()

    def _drain(self, node_id: NodeId) -> int:
        node = self.nodes[node_id]
        handled = 0
        while node.has_ready():
            ready = node.ready()
            self.storages[node_id].persist(ready)
            self._queue.extend(ready.messages)
            if ready.committed_entries:
                self.applied_index[node_id] = ready.committed_entries[-1].index
            node.advance(ready)
            handled += 1
        return handled

    def pump(self) -> None:
        """Hand out Readies and deliver messages until nothing is left to do."""
        steps = 0
        while steps < PUMP_STEPS_MAX:
            for node_id in NODE_IDS:
                steps += self._drain(node_id)
            if not self._queue:
                return
            while self._queue:
                message = self._queue.popleft()
                self.nodes[message.target].step(message)
                steps += 1
        raise RuntimeError(f"the cluster did not quiesce within {PUMP_STEPS_MAX} steps")

    def elect(self, leader_id: NodeId) -> None:
        self.nodes[leader_id].campaign()
        for _ in range(ELECTION_ROUNDS_MAX):
            self.pump()
            if self.nodes[leader_id].role == Role.LEADER and self._all_applied(leader_id):
                return
            for node in self.nodes.values():
                node.tick()
        raise RuntimeError(f"{leader_id} did not become leader")

    def _all_applied(self, leader_id: NodeId) -> bool:
        last_index = self.storages[leader_id].last_index()
        return all(index == last_index for index in self.applied_index.values())

    def round(self, leader_id: NodeId, batch_size: int, payload: bytes) -> int:
        leader = self.nodes[leader_id]
        last_index = 0
        for _ in range(batch_size):
            last_index = leader.propose(payload)
        self.pump()
        if any(index < last_index for index in self.applied_index.values()):
            raise RuntimeError(f"round ended with {self.applied_index} below {last_index}")
        return batch_size


def measure(batch_size: int, budget: Budget, seed: int) -> Measurement:
    cluster = PumpedCluster(seed)
    cluster.elect("n1")
    payload = bytes(ENTRY_BYTES)
    done, seconds = run_bounded(lambda: cluster.round("n1", batch_size, payload), budget)
    params: dict[str, object] = {
        "nodes": len(NODE_IDS),
        "batch_size": batch_size,
        "entry_bytes": ENTRY_BYTES,
    }
    return Measurement("propose-pump-apply", params, done, seconds)


def median_measurement(batch_size: int, budget: Budget, repeats: int) -> Measurement:
    runs = sorted(
        (measure(batch_size, budget, seed) for seed in range(repeats)),
        key=lambda run: run.entries_per_s,
    )
    return runs[(len(runs) - 1) // 2]


def render_table(rows: list[Measurement]) -> str:
    lines = [
        "| workload | nodes | batch | entry bytes | entries/s | µs/entry |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        p = row.params
        lines.append(
            f"| {row.workload} | {p['nodes']} | {p['batch_size']} | {p['entry_bytes']} | "
            f"{row.entries_per_s:,.0f} | {row.us_per_entry:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raftlog bench raft", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    parser.add_argument("--quick", action="store_true", help="a sub-second smoke run")
    parser.add_argument("--max-seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--max-entries", type=int, default=200_000, help="per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="runs to take the median of")
    args = parser.parse_args(argv)
    if args.max_seconds <= 0 or args.max_entries < 1 or args.repeats < 1:
        parser.error("--max-seconds, --max-entries and --repeats must be positive")
    budget = Budget(1_000, 0.2) if args.quick else Budget(args.max_entries, args.max_seconds)
    repeats = 1 if args.quick else args.repeats
    rows = [median_measurement(batch_size, budget, repeats) for batch_size in BATCH_SIZES]
    print(render_table(rows))
    if args.json:
        write_json_report(args.json, "raft", budget, repeats, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
