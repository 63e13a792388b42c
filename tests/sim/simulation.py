"""One seeded simulation run: a safety phase with faults, then a heal phase that must converge.

Rules this module keeps:
- ``random.Random(seed)`` is the only source of randomness; it hands child seeds, in a fixed
  order, to the options, the cluster and the fault schedule.
- Safety phase: ``options.safety_ticks`` ticks of faults chosen by the FaultSchedule, every
  checker running after every step.
- Heal phase: every fault off, every node up. Within ``options.heal_ticks_max`` ticks a leader
  must emerge, every pending proposal must be re-proposed and committed, and the cluster must
  converge: the same commit index everywhere, all of it applied, logs equal up to it, state
  machines equal, and every acknowledged proposal applied on every node.
- Any failure (a checker, the driver's contract checks, an exception from the core, no
  convergence) is raised as ``SimulationFailure`` whose message starts with the replay line.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass

from raftlog.raft.types import ConfChange, ConfChangeType, NodeId

from .checkers import SafetyViolation
from .cluster import Cluster
from .disk import LogState
from .history import History
from .options import AnyPlantedBug, SimOptions, draw_options
from .schedule import FaultSchedule
from .workload import body_of

TRACE_TAIL_EVENTS = 40


class LivenessFailure(Exception):
    """The healed cluster did not elect a leader, commit everything, or converge in time."""


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, options: SimOptions, cause: BaseException, trace: str) -> None:
        self.seed = seed
        self.options = options
        self.cause = cause
        super().__init__(
            f"{replay_line(seed, options)}\n"
            f"options: {options.describe()}\n"
            f"{type(cause).__name__}: {cause}\n"
            f"last {TRACE_TAIL_EVENTS} events:\n{trace}"
        )

    @property
    def is_safety_violation(self) -> bool:
        return isinstance(self.cause, SafetyViolation)


@dataclass(frozen=True, slots=True)
class RunResult:
    seed: int
    options: SimOptions
    trace_digest: str
    event_count: int
    proposal_count: int
    committed_count: int
    ticks: int


def replay_line(seed: int, options: SimOptions) -> str:
    bugs = ",".join(sorted(bug.value for bug in options.planted_bugs))
    line = f"SIM_SEED={seed} SIM_PROFILE={options.profile}"
    if bugs:
        line += f" SIM_BUGS={bugs}"
    return line + " .venv/bin/pytest -q tests/sim/test_simulation.py"


def run_simulation(
    seed: int, profile: str = "default", planted_bugs: frozenset[AnyPlantedBug] = frozenset()
) -> RunResult:
    root = random.Random(seed)
    options = draw_options(random.Random(root.getrandbits(64)), profile, planted_bugs)
    history = History()
    # Only the stores' lock files are real (store/store_lock.py); their data is simulated.
    with tempfile.TemporaryDirectory(prefix="raftlog-sim-") as root_dir:
        return _run(seed, options, history, root, root_dir)


def _run(
    seed: int, options: SimOptions, history: History, root: random.Random, root_dir: str
) -> RunResult:
    cluster: Cluster | None = None
    try:
        cluster = Cluster(options, random.Random(root.getrandbits(64)), history, root_dir)
        schedule = FaultSchedule(options, random.Random(root.getrandbits(64)))
        schedule.start(cluster)
        for _ in range(options.safety_ticks):
            schedule.before_tick(cluster)
            cluster.tick()
        heal(cluster)
    except Exception as error:  # a checker, the driver's contract checks, or the core itself
        raise SimulationFailure(seed, options, error, _trace(history, cluster)) from error
    finally:
        if cluster is not None:
            cluster.close()
    return RunResult(
        seed=seed,
        options=options,
        trace_digest=history.digest(),
        event_count=len(history.events),
        proposal_count=len(cluster.workload.proposals),
        committed_count=len(cluster.checker.committed),
        ticks=cluster.clock.now_tick,
    )


def _trace(history: History, cluster: Cluster | None) -> str:
    nodes = f"\nnodes:\n{cluster.describe_nodes()}" if cluster is not None else ""
    return history.tail(TRACE_TAIL_EVENTS) + nodes


def heal(cluster: Cluster) -> None:
    """All faults off, all nodes up; then commit every pending proposal and converge."""
    faults = cluster.network.faults
    faults.drop_probability = 0.0
    faults.duplicate_probability = 0.0
    faults.delay_probability = 0.0
    cluster.crash_after_vote_probability = 0.0
    cluster.leader_crash_before_send_probability = 0.0
    cluster.heal()
    for node_id in cluster.down_nodes():
        cluster.restart(node_id)
    heal_start_tick = cluster.clock.now_tick
    for _ in range(cluster.options.heal_ticks_max):
        leader = cluster.leader()
        if leader is not None:
            _restore_membership(cluster, leader)
            leader_log = cluster.drivers[leader].disk.current
            for proposal in cluster.workload.pending():
                # A client retries once its entry is gone from the leader's log (or never got
                # there); re-sending what is already on its way would only flood the log.
                if not any(
                    _holds(leader_log, index, proposal.data) for _, _, index in proposal.attempts
                ):
                    cluster.propose(leader, proposal.data)
            if not cluster.workload.pending() and _settled(cluster):
                check_convergence(cluster)
                return
        cluster.tick()
    raise LivenessFailure(
        f"no convergence {cluster.options.heal_ticks_max} ticks after healing at tick "
        f"{heal_start_tick}: leader={cluster.leader()} "
        f"pending proposals={len(cluster.workload.pending())}\n{cluster.describe_nodes()}"
    )


def _restore_membership(cluster: Cluster, leader: NodeId) -> None:
    """The operator adds back every node the safety phase removed, one at a time."""
    node = cluster.drivers[leader].node
    assert node is not None
    for node_id in cluster.node_ids:
        if node_id not in node.conf_state.voters:
            cluster.propose_conf_change(leader, ConfChange(ConfChangeType.ADD_VOTER, node_id))
            return


def _holds(log: LogState, index: int, data: bytes) -> bool:
    return body_of(log.entry_at(index)) == data


def _settled(cluster: Cluster) -> bool:
    """Every node has committed and applied the leader's whole log."""
    leader_id = cluster.leader()
    if leader_id is None:
        return False
    leader_node = cluster.drivers[leader_id].node
    assert leader_node is not None
    if leader_node.conf_state.voters != cluster.node_ids:
        return False
    leader_last_index = cluster.drivers[leader_id].disk.current.last_index
    for node_id in cluster.node_ids:
        driver = cluster.drivers[node_id]
        node = driver.node
        if node is None or node.commit_index != leader_last_index:
            return False
        if driver.applied_index != leader_last_index:
            return False
    return True


def check_convergence(cluster: Cluster) -> None:
    """Logs equal up to commit, state machines equal, every acknowledged proposal everywhere."""
    reference_id = cluster.node_ids[0]
    reference = cluster.drivers[reference_id]
    for node_id in cluster.node_ids[1:]:
        driver = cluster.drivers[node_id]
        if driver.state_machine != reference.state_machine:
            raise SafetyViolation(f"state machines of {reference_id} and {node_id} differ")
        commit_index = driver.applied_index
        for index in range(driver.disk.current.snapshot_index + 1, commit_index + 1):
            if driver.disk.current.entry_at(index) != reference.state_machine[index - 1]:
                raise SafetyViolation(f"{node_id}'s log differs from the state machines at {index}")
    applied_data = {body_of(entry) for entry in reference.state_machine}
    for proposal in cluster.workload.proposals.values():
        if proposal.data not in applied_data:
            if proposal.acknowledged:
                raise SafetyViolation(f"acknowledged proposal {proposal.data!r} was lost")
            raise LivenessFailure(f"pending proposal {proposal.data!r} never committed")
