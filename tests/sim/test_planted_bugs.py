"""The simulation catches each classic Raft bug the core can be told to commit.

Each planted bug (raftlog.raft.types.PlantedBug) runs under the fault profile aimed at it
(tests/sim/options.py) on seeds 0, 1, 2, ... until a safety checker fires; the test asserts
that happens within SEED_BUDGET seeds, and that the same seed passes with the bug off, so the
checker fired because of the bug and not because of the harness. Detection rates per bug are
recorded in tests/sim/README.md.
"""

from __future__ import annotations

import pytest

from raftlog.raft.types import PlantedBug

from .simulation import SimulationFailure, run_simulation

SEED_BUDGET = 200

PROFILE_FOR_BUG = {
    PlantedBug.COMMIT_PREVIOUS_TERM_BY_COUNTING: "figure8",
    PlantedBug.VOTE_NOT_PERSISTED: "vote-crash",
    PlantedBug.SKIP_LOG_MATCHING_CHECK: "divergence",
}


def first_failing_seed(bug: PlantedBug, profile: str) -> tuple[int, SimulationFailure]:
    for seed in range(SEED_BUDGET):
        try:
            run_simulation(seed, profile, frozenset({bug}))
        except SimulationFailure as failure:
            if failure.is_safety_violation:
                return seed, failure
    pytest.fail(f"{bug.value}: no safety checker fired in {SEED_BUDGET} seeds of {profile!r}")


@pytest.mark.parametrize("bug", list(PROFILE_FOR_BUG))
def test_simulation_catches_planted_bug(bug: PlantedBug) -> None:
    profile = PROFILE_FOR_BUG[bug]
    seed, failure = first_failing_seed(bug, profile)
    assert f"SIM_SEED={seed} SIM_PROFILE={profile} SIM_BUGS={bug.value}" in str(failure)
    # The same schedule with the bug off is safe: the checker fired because of the bug.
    run_simulation(seed, profile)
