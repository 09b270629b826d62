"""CI's share of the fault simulation: a few hundred seeds, and every seed that found a bug.

Each regression seed broke an invariant before its fix (see docs/design/simulator.md, "Bugs
found"); it must pass now, replayed exactly as ``lbctl sim --seed N --scenario S`` does.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from itertools import repeat

import pytest

from actors.runtime.sim.run import simulate
from actors.runtime.sim.scenarios import SCENARIOS, scenario_for

CI_SEEDS = range(1000, 1210)  # 30 per scenario, away from the seeds the 10,000-seed run starts with
STEPS = 500


@pytest.mark.parametrize("seed, scenario", [
    pytest.param(165, "rolling_restart", id="stale-orphan-cleanup-after-reregistration"),
    pytest.param(1533, "steady", id="live-broker-expired-around-log-outage"),
    pytest.param(1676, "scale_in", id="drain-request-from-lagging-view-1676"),
    pytest.param(3279, "scale_in", id="drain-request-from-lagging-view-3279"),
    pytest.param(3748, "scale_in", id="drain-request-from-lagging-view-3748"),
    pytest.param(4283, "split_storm", id="unregistered-restarted-broker-served"),
    pytest.param(4773, "split_storm", id="repeated-split-confirmation-id"),
    pytest.param(7867, "split_storm", id="leader-hung-on-a-bundle-split-into-itself"),
    pytest.param(1029374, "scale_in", id="departed-session-served-after-reregistration"),
    pytest.param(20018, "leader_churn", id="forged-epoch-let-in-by-a-later-election"),
    pytest.param(20037, "scale_in", id="namespace-copied-a-forged-epoch"),
    pytest.param(20105, "hot_bundle", id="leader-stepped-down-for-a-forged-election"),
    pytest.param(300296, "scale_in", id="void-record-cleanup-refused-after-reregistration"),
    pytest.param(342733, "split_storm", id="stale-void-entry-after-a-split-into-itself-342733"),
    pytest.param(344574, "split_storm", id="stale-void-entry-after-a-split-into-itself-344574"),
    pytest.param(608009, "scale_in", id="orphan-reassignment-backed-off-past-the-expiry-limit"),
    pytest.param(5020, "hot_bundle", id="late-shedding-command-over-a-throttle-cap"),
    pytest.param(2013, "rolling_restart", id="forged-election-fenced-the-store-2013"),
    pytest.param(2007, "leader_churn", id="forged-election-fenced-the-store-2007"),
    pytest.param(712876, "scale_in", id="six-drops-in-a-row-of-one-bundles-placement"),
    pytest.param(927290, "steady", id="outages-undercounted-by-a-tick-each-expired-a-live-broker"),
    pytest.param(1021901, "split_storm", id="admin-transfer-raced-a-drain-its-shard-had-not-folded"),
    pytest.param(1023297, "scale_out", id="admin-transfer-raced-a-drain-1023297"),
    pytest.param(1041607, "split_storm", id="split-approved-during-a-pause-was-sent-at-once"),
    pytest.param(1041613, "split_storm", id="split-approved-during-a-pause-1041613"),
])
def test_regression_seed(seed: int, scenario: str) -> None:
    result = simulate(seed, scenario, STEPS)
    assert result.ok, result.violation


def test_a_few_hundred_seeds_break_no_invariant() -> None:
    names = [scenario_for(seed).name for seed in CI_SEEDS]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(simulate, CI_SEEDS, names, repeat(STEPS), chunksize=8))
    failed = [f"seed {r.seed} {r.scenario}: {r.violation}" for r in results if not r.ok]
    assert not failed, failed
    assert {r.scenario for r in results} == {n for n, s in SCENARIOS.items() if s.rotation}


LARGE_SEEDS = (1, 2)
LARGE_STEPS = 60


def test_the_large_scenario_keeps_every_invariant_at_pulsar_scale() -> None:
    """50 brokers x 8,192 bundles with crashes, outages and a rolling restart."""
    assert SCENARIOS["large"].brokers >= 50 and SCENARIOS["large"].bundles >= 8192
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(simulate, LARGE_SEEDS, repeat("large"), repeat(LARGE_STEPS)))
    failed = [f"seed {r.seed}: {r.violation}" for r in results if not r.ok]
    assert not failed, failed
    assert all(r.faults > 0 for r in results)
