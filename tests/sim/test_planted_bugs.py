"""The simulation catches each classic Raft bug the core, the node's Ready handler or its Raft
log storage can be told to commit.

Each planted bug (raftlog.raft.types.PlantedBug in the core; NodePlantedBug in
node/replication) runs under the fault profile aimed at it
(tests/sim/options.py) on seeds 0, 1, 2, ... until a safety checker fires; the test asserts
that happens within SEED_BUDGET seeds, and that the same seed passes with the bug off, so the
checker fired because of the bug and not because of the harness. Detection rates per bug are
recorded in tests/sim/README.md.
"""

from __future__ import annotations

import pytest

from raftlog.node.replication.planted_bugs import NodePlantedBug
from raftlog.raft.types import PlantedBug

from .options import AnyPlantedBug
from .simulation import SimulationFailure, run_simulation

SEED_BUDGET = 1000

PROFILE_FOR_BUG: dict[AnyPlantedBug, str] = {
    PlantedBug.COMMIT_PREVIOUS_TERM_BY_COUNTING: "figure8",
    PlantedBug.VOTE_NOT_PERSISTED: "vote-crash",
    PlantedBug.SKIP_LOG_MATCHING_CHECK: "divergence",
    NodePlantedBug.SEND_BEFORE_PERSIST: "vote-crash",
    NodePlantedBug.VOTE_NOT_SYNCED: "vote-crash",
    NodePlantedBug.COMMIT_LOG_NOT_SYNCED: "default",
    NodePlantedBug.APPLY_BEFORE_COMMIT: "default",
}


def first_failing_seed(bug: AnyPlantedBug, profile: str) -> tuple[int, SimulationFailure]:
    """Each search starts from seed 0 and shares nothing with other tests, so its result does
    not depend on which tests ran before it."""
    for seed in range(SEED_BUDGET):
        try:
            run_simulation(seed, profile, frozenset({bug}))
        except SimulationFailure as failure:
            if failure.is_safety_violation:
                return seed, failure
    pytest.fail(f"{bug.value}: no safety checker fired in {SEED_BUDGET} seeds of {profile!r}")


@pytest.mark.parametrize("bug", list(PROFILE_FOR_BUG), ids=lambda bug: bug.value)
def test_simulation_catches_planted_bug(bug: AnyPlantedBug) -> None:
    profile = PROFILE_FOR_BUG[bug]
    seed, failure = first_failing_seed(bug, profile)
    assert f"SIM_SEED={seed} SIM_PROFILE={profile} SIM_BUGS={bug.value}" in str(failure)
    # The same schedule with the bug off is safe: the checker fired because of the bug.
    run_simulation(seed, profile)
