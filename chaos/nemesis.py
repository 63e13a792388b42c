"""The nemesis: a seeded schedule of faults (:func:`plan`) and the thread that applies it to a
:class:`~raftlog.chaos.target.Target`, recording each fault in the history (:class:`Nemesis`).

Fault kinds (``--faults`` names in brackets):

* ``kill`` [kill]: SIGKILL one node (the leader or a random node), restart it after the hold;
* ``pause`` [pause]: SIGSTOP one node, SIGCONT after the hold (a silent stall);
* ``freeze-leader`` [freeze]: SIGSTOP the leader for 5-30 s, then SIGCONT (a long GC pause,
  a hung disk: its connections stay open, so only a client that looks elsewhere recovers
  before the freeze ends; the recovery figure says how long the clients stalled);
* ``rolling-restart`` [rolling-restart]: gracefully restart every node, one after another;
* ``partition-halves`` [partition]: split the nodes into a minority and a majority;
* ``partition-isolate-leader`` [partition]: cut the current leader off from everyone (under a
  controller the target can partition, from the controller members too: the fencing test);
* ``partition-one-way`` [partition]: drop traffic in one direction between two nodes;
* ``partition-bridge`` [partition]: two sides that only one node (the bridge) talks to;
* ``partition-leader-controller`` [controller]: cut the master off from its controller
  members only (it still reaches its slaves and clients: the controller elects another while
  the old master must fence itself); needs a target with ``controller_ids``;
* ``partition-leader-clients`` [clients]: cut the leader (master) off from the clients only
  (it still reaches its peers and controller, so nobody elects another: the clients must
  wait it out, their writes in flight an unknown outcome); needs a target whose clients dial
  through link proxies (the local target with partitions);
* ``latency-leader`` [latency]: slow every link to and from the leader by a seeded
  20-200 ms (the local target's link proxies; the containers target has no netem).

Rules this module keeps:
- The schedule depends only on (seed, duration, fault names, node ids): ``plan`` draws from
  its own ``random.Random(seed)``, so the same seed gives the same schedule (``describe``
  prints it). A latency fault's delay is drawn only for latency faults, so adding the family
  left the schedules of every other fault list as they were. Who "leader" is gets resolved
  when the fault starts, and is recorded.
- Faults never overlap: each holds 1-5 s, then is healed, then a quiet gap (2-5 s) follows;
  the first fault waits a few seconds and the last ends a few seconds before the duration.
- A fault is recorded as ``fault-start`` once applied (``fail`` if it could not be) and
  ``fault-end`` once healed, with the nodes it hit.
- Whatever happens (an error, a stop request), ``run`` ends with everything healed: links
  restored, paused nodes resumed, killed nodes restarted. Every wait is bounded.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raftlog.chaos.history import FAULT_END, FAULT_START, FaultValue, Recorder
from raftlog.chaos.link_proxy import CLIENT
from raftlog.chaos.target import Link, Target, TargetError, leader_of, partition_links

KILL = "kill"
PAUSE = "pause"
FREEZE_LEADER = "freeze-leader"
ROLLING_RESTART = "rolling-restart"
PARTITION_HALVES = "partition-halves"
PARTITION_ISOLATE_LEADER = "partition-isolate-leader"
PARTITION_ONE_WAY = "partition-one-way"
PARTITION_BRIDGE = "partition-bridge"
PARTITION_KINDS = (PARTITION_HALVES, PARTITION_ISOLATE_LEADER, PARTITION_ONE_WAY, PARTITION_BRIDGE)
PARTITION_LEADER_CONTROLLER = "partition-leader-controller"
PARTITION_LEADER_CLIENTS = "partition-leader-clients"
LATENCY_LEADER = "latency-leader"
# The kinds that act on links between nodes (the local target needs its proxies for them).
LINK_KINDS = (
    *PARTITION_KINDS,
    PARTITION_LEADER_CONTROLLER,
    PARTITION_LEADER_CLIENTS,
    LATENCY_LEADER,
)
# What each --faults name expands to.
FAULT_FAMILIES: dict[str, tuple[str, ...]] = {
    KILL: (KILL,),
    PAUSE: (PAUSE,),
    "freeze": (FREEZE_LEADER,),
    ROLLING_RESTART: (ROLLING_RESTART,),
    "partition": PARTITION_KINDS,
    "latency": (LATENCY_LEADER,),
    "controller": (PARTITION_LEADER_CONTROLLER,),
    "clients": (PARTITION_LEADER_CLIENTS,),
}
# A symbolic target resolved when the fault starts.
LEADER = "leader"

MIN_HOLD_S = 1.0
MAX_HOLD_S = 5.0
# A leader freeze holds longer; its hold is the same draw, scaled (no extra draw, so adding
# the family leaves every other fault list's schedules as they were).
MIN_FREEZE_S = 5.0
MAX_FREEZE_S = 30.0
MIN_DELAY_MS = 20
MAX_DELAY_MS = 200
MIN_GAP_S = 2.0
MAX_GAP_S = 5.0
FIRST_FAULT_S = 3.0
QUIET_TAIL_S = 3.0
# A rolling restart has no hold; this is what the schedule reserves for it per node.
ROLLING_RESTART_PER_NODE_S = 3.0
MAX_FAULTS = 10_000
_LEADER_WAIT_S = 3.0
_PROCESS = "nemesis"


@dataclass(frozen=True, slots=True)
class PlannedFault:
    """One fault of the schedule: it starts ``at_s`` seconds into the run, holds ``hold_s``
    seconds, and targets ``targets`` (node ids or ``"leader"``; for a bridge, the bridge node
    first; for one-way, (from, to)). ``delay_ms``: a latency fault's added delay."""

    at_s: float
    kind: str
    hold_s: float
    targets: tuple[str, ...]
    delay_ms: int = 0

    def describe(self) -> str:
        """One line: ``+  3.00 s  kill [leader] for 2.41 s``."""
        hold = "" if self.kind == ROLLING_RESTART else f" for {self.hold_s:.2f} s"
        delay = f" (+{self.delay_ms} ms)" if self.kind == LATENCY_LEADER else ""
        return f"+{self.at_s:7.2f} s  {self.kind} [{', '.join(self.targets)}]{delay}{hold}"


def fault_kinds(names: Sequence[str]) -> list[str]:
    """The fault kinds the ``--faults`` names stand for; raises ValueError on an unknown one."""
    kinds: list[str] = []
    for name in names:
        family = FAULT_FAMILIES.get(name)
        if family is None:
            known = ", ".join(FAULT_FAMILIES)
            raise ValueError(f"unknown fault {name!r} (known: {known})")
        kinds += [kind for kind in family if kind not in kinds]
    if not kinds:
        raise ValueError("no fault named")
    return kinds


def _targets(rng: random.Random, kind: str, node_ids: Sequence[str]) -> tuple[str, ...]:
    nodes = list(node_ids)
    if kind in (KILL, PAUSE):
        return (LEADER,) if rng.random() < 0.5 else (rng.choice(nodes),)
    if kind == ROLLING_RESTART:
        return tuple(nodes)
    if kind in (
        PARTITION_ISOLATE_LEADER,
        PARTITION_LEADER_CONTROLLER,
        PARTITION_LEADER_CLIENTS,
        LATENCY_LEADER,
        FREEZE_LEADER,
    ):
        return (LEADER,)
    if kind == PARTITION_HALVES:
        rng.shuffle(nodes)
        return tuple(sorted(nodes[: len(nodes) // 2]))  # the minority side
    if kind == PARTITION_ONE_WAY:
        source = LEADER if rng.random() < 0.5 else rng.choice(nodes)
        return (source, rng.choice(nodes))  # resolved to distinct nodes at start
    if kind == PARTITION_BRIDGE:
        return (rng.choice(nodes),)
    raise ValueError(f"unknown fault kind {kind!r}")


def plan(
    seed: int, duration_s: float, fault_names: Sequence[str], node_ids: Sequence[str]
) -> list[PlannedFault]:
    """The fault schedule of a run: the same arguments always give the same list."""
    rng = random.Random(seed)
    kinds = fault_kinds(fault_names)
    schedule: list[PlannedFault] = []
    at_s = FIRST_FAULT_S
    for _ in range(MAX_FAULTS):
        kind = rng.choice(kinds)
        hold_s = round(rng.uniform(MIN_HOLD_S, MAX_HOLD_S), 2)
        if kind == FREEZE_LEADER:
            share = (hold_s - MIN_HOLD_S) / (MAX_HOLD_S - MIN_HOLD_S)
            hold_s = round(MIN_FREEZE_S + share * (MAX_FREEZE_S - MIN_FREEZE_S), 2)
        targets = _targets(rng, kind, node_ids)
        delay_ms = rng.randint(MIN_DELAY_MS, MAX_DELAY_MS) if kind == LATENCY_LEADER else 0
        gap_s = round(rng.uniform(MIN_GAP_S, MAX_GAP_S), 2)
        busy_s = ROLLING_RESTART_PER_NODE_S * len(node_ids) if kind == ROLLING_RESTART else hold_s
        if at_s + busy_s > duration_s - QUIET_TAIL_S:
            break
        schedule.append(PlannedFault(round(at_s, 2), kind, hold_s, targets, delay_ms))
        at_s += busy_s + gap_s
    return schedule


def describe(schedule: Sequence[PlannedFault], seed: int) -> str:
    """The schedule as printed by ``raftlog chaos run``."""
    lines = [f"fault schedule (seed {seed}): {len(schedule)} faults"]
    lines += [f"  {fault.describe()}" for fault in schedule]
    return "\n".join(lines)


class Nemesis:
    """Applies a schedule to a target in its own thread, recording faults in ``recorder``.
    ``log`` receives one line per fault applied or healed (default: nothing)."""

    def __init__(
        self,
        target: Target,
        recorder: Recorder,
        schedule: Sequence[PlannedFault],
        *,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self._target = target
        self._recorder = recorder
        self._schedule = list(schedule)
        self._log = log or (lambda _line: None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._killed: set[str] = set()
        self._paused: set[str] = set()
        self._partitioned = False
        self.errors: list[str] = []
        self.applied: list[FaultValue] = []

    # -- thread ----------------------------------------------------------------------------

    def start(self, run_start_s: float) -> None:
        """Run the schedule in a thread; ``run_start_s`` is the monotonic time of +0 s."""
        self._thread = threading.Thread(
            target=self.run, args=(run_start_s,), name="chaos-nemesis", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 120.0) -> None:
        """Stop early (the current fault is healed at once) and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def run(self, run_start_s: float) -> None:
        """Apply every planned fault in order, then heal everything (always)."""
        last_end_s = run_start_s - MIN_GAP_S
        try:
            for fault in self._schedule:
                # Start on schedule, or a full minimum gap after the last fault if it overran
                # (a restart can take longer than its planned hold): faults never pile up.
                start_s = max(run_start_s + fault.at_s, last_end_s + MIN_GAP_S)
                if self._stop.wait(max(0.0, start_s - time.monotonic())):
                    break
                self._apply(fault)
                last_end_s = time.monotonic()
                if self._stop.is_set():
                    break
        finally:
            self.heal_all()

    # -- faults ----------------------------------------------------------------------------

    def _resolve(self, name: str, avoid: str | None = None) -> str:
        """A node id for ``name``: itself, or the current leader for "leader" (the first
        other node when none is known within a few seconds)."""
        nodes = self._target.node_ids()
        if name != LEADER:
            if name == avoid:
                return nodes[(nodes.index(name) + 1) % len(nodes)]
            return name
        deadline = time.monotonic() + _LEADER_WAIT_S
        for _ in range(int(_LEADER_WAIT_S / 0.1) + 1):
            found = leader_of(self._target)
            if found is not None and found[0] != avoid:
                return found[0]
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        return next(n for n in nodes if n != avoid)

    def _record_start(self, kind: str, targets: tuple[str, ...], ok: bool, why: str = "") -> None:
        value = FaultValue(name=kind, targets=targets)
        self._recorder.record(_PROCESS, "ok" if ok else "fail", FAULT_START, value)
        if ok:
            self.applied.append(value)
            self._log(f"fault: {kind} [{', '.join(targets)}]")
        else:
            self.errors.append(f"{kind} [{', '.join(targets)}]: {why}")
            self._log(f"fault not applied: {kind} [{', '.join(targets)}]: {why}")

    def _record_end(self, kind: str, targets: tuple[str, ...]) -> None:
        self._recorder.event(_PROCESS, FAULT_END, FaultValue(name=kind, targets=targets))
        self._log(f"healed: {kind} [{', '.join(targets)}]")

    def _aim(self, fault: PlannedFault) -> tuple[tuple[str, ...], set[Link]]:
        """The nodes ``fault`` hits (symbolic targets resolved now) and the links it cuts."""
        nodes = self._target.node_ids()
        links: set[Link] = set()
        if fault.kind in (KILL, PAUSE, FREEZE_LEADER):
            targets: tuple[str, ...] = (self._resolve(fault.targets[0]),)
        elif fault.kind in (PARTITION_ISOLATE_LEADER, LATENCY_LEADER):
            leader = self._resolve(LEADER)
            targets = (leader,)
            links = partition_links(nodes, [[leader], [n for n in nodes if n != leader]])
            if fault.kind == PARTITION_ISOLATE_LEADER:
                links |= {(leader, member) for member in self._target.controller_ids}
        elif fault.kind == PARTITION_LEADER_CONTROLLER:
            targets = (self._resolve(LEADER),)
            links = {(targets[0], member) for member in self._target.controller_ids}
        elif fault.kind == PARTITION_LEADER_CLIENTS:
            targets = (self._resolve(LEADER),)
            links = {(CLIENT, targets[0])}
        elif fault.kind == PARTITION_HALVES:
            targets = fault.targets
            minority = set(targets)
            links = partition_links(
                nodes, [sorted(minority), [n for n in nodes if n not in minority]]
            )
        elif fault.kind == PARTITION_ONE_WAY:
            source = self._resolve(fault.targets[0])
            destination = self._resolve(fault.targets[1], avoid=source)
            targets = (source, destination)
            links = {(source, destination)}
        elif fault.kind == PARTITION_BRIDGE:
            bridge = fault.targets[0]
            others = [n for n in nodes if n != bridge]
            half = max(1, len(others) // 2)
            targets = (bridge,)
            links = partition_links(nodes, [[*others[:half], bridge], [*others[half:], bridge]])
        else:
            raise ValueError(f"unknown fault kind {fault.kind!r}")
        return targets, links

    def _apply(self, fault: PlannedFault) -> None:
        if fault.kind == ROLLING_RESTART:
            self._rolling_restart(fault)
            return
        targets, links = self._aim(fault)
        try:
            if fault.kind == KILL:
                self._target.kill(targets[0])
                self._killed.add(targets[0])
            elif fault.kind in (PAUSE, FREEZE_LEADER):
                self._target.pause(targets[0])
                self._paused.add(targets[0])
            elif fault.kind == LATENCY_LEADER:
                if not self._target.supports_latency:
                    raise TargetError(f"the {self._target.name} target cannot slow links")
                self._partitioned = True  # set first: a half-applied delay is healed too
                self._target.delay(links, fault.delay_ms)
            else:
                if not self._target.supports_partitions:
                    raise TargetError(f"the {self._target.name} target cannot partition")
                if not links:
                    raise TargetError(f"{fault.kind}: no controller member to cut off")
                self._partitioned = True  # set first: a half-applied block is healed too
                # Isolating the leader and the one-way drop are silent (a blackhole, noticed
                # only by timeouts); halves and the bridge refuse connections outright.
                silent = fault.kind in (
                    PARTITION_ISOLATE_LEADER,
                    PARTITION_LEADER_CONTROLLER,
                    PARTITION_LEADER_CLIENTS,
                    PARTITION_ONE_WAY,
                )
                self._target.block(links, silent=silent)
        except TargetError as error:
            self._record_start(fault.kind, targets, ok=False, why=str(error))
            return
        self._record_start(fault.kind, targets, ok=True)
        self._stop.wait(fault.hold_s)
        self._heal_one(fault.kind, targets)

    def _heal_one(self, kind: str, targets: tuple[str, ...]) -> None:
        try:
            if kind == KILL:
                self._target.restart(targets[0])
                self._killed.discard(targets[0])
            elif kind in (PAUSE, FREEZE_LEADER):
                self._target.resume(targets[0])
                self._paused.discard(targets[0])
            else:
                self._target.heal()
                self._partitioned = False
        except TargetError as error:
            self.errors.append(f"healing {kind} [{', '.join(targets)}]: {error}")
            self._log(f"heal failed: {kind}: {error}")
            return
        self._record_end(kind, targets)

    def _rolling_restart(self, fault: PlannedFault) -> None:
        self._record_start(fault.kind, fault.targets, ok=True)
        for node_id in fault.targets:
            if self._stop.is_set():
                break
            try:
                self._target.restart(node_id)
            except TargetError as error:
                self.errors.append(f"rolling restart of {node_id}: {error}")
                self._killed.add(node_id)  # heal_all tries again
        self._record_end(fault.kind, fault.targets)

    def heal_all(self) -> None:
        """Restore links, resume paused nodes, restart killed ones (each tried once)."""
        if self._partitioned:
            try:
                self._target.heal()
                self._partitioned = False
            except TargetError as error:
                self.errors.append(f"final heal: {error}")
        for node_id in sorted(self._paused):
            try:
                self._target.resume(node_id)
                self._paused.discard(node_id)
            except TargetError as error:
                self.errors.append(f"final resume of {node_id}: {error}")
        for node_id in sorted(self._killed):
            try:
                self._target.restart(node_id)
                self._killed.discard(node_id)
            except TargetError as error:
                self.errors.append(f"final restart of {node_id}: {error}")
