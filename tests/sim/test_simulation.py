"""The seeded simulation soak: every seed runs a faulty safety phase, then heals and converges.

``SIM_SEEDS=n`` runs seeds 0..n-1 (``make test`` passes 200, ``make sim-soak`` 10,000); each
seed is its own test, so every failing seed is reported, each with its replay line
(``SIM_SEED=<n> SIM_PROFILE=...``). ``SIM_SEED=n`` runs that one seed again, step for step.
"""

from __future__ import annotations

import pytest

from .seeds import bugs_from_env, profile_from_env, seeds_from_env
from .simulation import SimulationFailure, run_simulation


@pytest.mark.parametrize("seed", seeds_from_env())
def test_seed_keeps_raft_safe_and_converges_after_healing(seed: int) -> None:
    failure: SimulationFailure | None = None
    try:
        result = run_simulation(seed, profile_from_env(), bugs_from_env())
    except SimulationFailure as caught:
        failure = caught
    if failure is not None:
        # The replay line, options, cause and trace say it all; a Python traceback would not.
        pytest.fail(str(failure), pytrace=False)
    assert result.committed_count >= 1, "a run that commits nothing proves nothing"
