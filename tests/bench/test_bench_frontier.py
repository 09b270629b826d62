"""The frontier bound (bench.frontier): no strategy's figures beat it, and water-filling meets it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import quality
from bench.frontier import bound, level, mean_usage, report, start_ratios
from bench.scenarios import QUICK, build

values = st.lists(st.floats(0.0, 5.0), min_size=1, max_size=30)


@given(values, st.floats(0.0, 200.0))
def test_the_level_is_the_lowest_cut_that_the_budget_pays_for(vs: list[float], budget: float) -> None:
    a = level(vs, budget)
    cut = sum(max(0.0, v - a) for v in vs)
    assert a >= 0.0
    assert cut == pytest.approx(min(budget, sum(vs)), abs=1e-9)
    if a > 1e-9:  # any lower level would cost more than the budget
        assert sum(max(0.0, v - (a - 1e-6)) for v in vs) > budget


def test_water_filling_a_divisible_layout_meets_the_bound() -> None:
    ratios = [1.4, 1.2, 1.0, 0.8, 0.6]
    b = bound(ratios, moved=0.3 / 5)  # 0.3 of the mean load moved
    # Cutting both above-mean brokers to 1.15 frees 0.25 + 0.05 = 0.3; raising both below-mean
    # ones to 0.85 takes 0.05 + 0.25 = 0.3.
    assert b.max_mean == pytest.approx(1.15) and b.min_mean == pytest.approx(0.85)
    assert b.spread == pytest.approx(0.3)
    assert b.std == pytest.approx(math.sqrt(4 * 0.15 ** 2 / 5))
    assert bound(ratios, moved=1.0).spread == 0.0


def test_no_strategy_balances_beyond_the_bound_for_what_it_moved() -> None:
    scenario = build("steady-zipf", QUICK)
    ratios, usage = start_ratios(scenario), mean_usage(scenario)
    assert usage == pytest.approx(0.5)
    for row in quality.rows(quick=True, scenarios=["steady-zipf"]):
        b = bound(ratios, row["moved_pct"] / 100.0)
        assert row["max_mean"] >= b.max_mean - 1e-9, row["strategy"]
        assert row["std"] >= b.std_at(usage) - 1e-9, row["strategy"]


def test_the_report_prints_every_strategy_beside_its_bound() -> None:
    text = report(quick=True)
    for strategy in quality.strategies():
        assert strategy in text
    assert "max/mean (bound)" in text.splitlines()[0]
