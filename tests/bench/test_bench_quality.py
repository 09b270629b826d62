"""Benchmark B: scenarios are deterministic, and the metrics say what docs/spec/bench.md defines."""

from __future__ import annotations

from typing import Any

import pytest

from balancer.shedding.base import STRATEGY_MODULES
from balancer.simulator import BrokerModel, CycleStats, Membership, Move, SimResult
from bench import quality
from bench.quality import Profile, forced_share, metrics, settle_cycles, simulate
from bench.scenarios import (
    BROKER_CAPACITY,
    BUILDERS,
    QUICK,
    Scenario,
    balanced_layout,
    build,
    excess,
    hot_bundle,
    shortfall,
)

MIB = 1024 * 1024
MODEL = BrokerModel(0.0, 1.0 / (100 * MIB))


def _tiny(owners: dict[str, str], loads: dict[str, float], cycles: int = 20, **kw: object) -> Scenario:
    """A hand-made scenario: loads in MiB/s in+out, brokers of 100 MiB/s."""
    brokers = sorted(set(owners.values()))
    fields: dict[str, object] = {"cycles": cycles, "disturbance": 0, "settle_from": 0,
                                 "window": cycles // 2, **kw}
    return Scenario("tiny", "hand-made", owners, dict.fromkeys(brokers, MODEL),
                    {b: v * MIB for b, v in loads.items()}, dict.fromkeys(loads, 1),
                    **fields)  # type: ignore[arg-type]


def _bundles(count: int) -> list[str]:
    return [f"t/ns/0x{i:08x}_0x{i + 1:08x}" for i in range(count)]


def _row(scenario: Scenario, strategy: str = "ThresholdShedder", **extra: object) -> dict[str, Any]:
    result, _ = simulate(scenario, strategy, seed=1, extra=extra)
    return metrics(scenario, result, Profile(scenario), grace_cycles=30)


@pytest.mark.parametrize("strategy", quality.PULSAR_STRATEGIES)
def test_a_perfectly_balanced_cluster_scores_perfectly_and_moves_nothing(strategy: str) -> None:
    bundles = _bundles(8)
    owners = {b: f"b{i % 4}" for i, b in enumerate(bundles)}
    row = _row(_tiny(owners, dict.fromkeys(bundles, 20.0), moved_floor=0.0), strategy)
    assert row["max_mean"] == pytest.approx(1.0) and row["max_mean_floor"] == 1.0
    assert row["std"] == pytest.approx(0.0, abs=1e-9) and row["min_mean"] == pytest.approx(1.0)
    assert (row["moves"], row["moved_pct"], row["flaps"], row["unloads_h"]) == (0, 0.0, 0, 0.0)
    assert row["cycles"] == 0 and row["moved_x"] is None


def test_metrics_of_a_hand_made_record() -> None:
    a, b, c = _bundles(3)
    scenario = _tiny({a: "x", b: "x", c: "y"}, {a: 30.0, b: 10.0, c: 0.0}, cycles=4,
                     moved_floor=0.1, window=2)
    before, after = {"x": 0.4, "y": 0.0}, {"x": 0.3, "y": 0.1}
    cycles = [CycleStats(i, 2, *_balance(u), 0, 0.0, u)
              for i, u in enumerate([before, before, after, after])]
    moves = [Move(2, b, "x", "y", 10.0 * MIB, "Overloaded", "s")]
    row = metrics(scenario, SimResult("s", cycles, moves), Profile(scenario), grace_cycles=30)
    assert row["moved_pct"] == pytest.approx(25.0)  # 10 of 40 MiB/s
    assert row["moved_x"] == pytest.approx(2.5)  # floor 10 %
    assert row["max_mean"] == pytest.approx(1.5) and row["std"] == pytest.approx(0.1)
    assert row["max_mean_floor"] == pytest.approx(1.5)  # the 30 MiB/s bundle / 20 MiB/s mean
    assert row["min_mean"] == pytest.approx(0.5)
    assert row["unloads_h"] == pytest.approx(30.0)  # one move in a 2-cycle window
    assert row["cycles"] == 2  # 2.0 > 1.25 x 1.5 until the move


def _balance(usages: dict[str, float]) -> tuple[float, float]:
    from balancer.simulator import balance

    return balance(list(usages.values()))


def test_the_max_mean_floor_is_the_largest_bundle_over_the_mean_broker() -> None:
    a, b, c = _bundles(3)
    profile = Profile(_tiny({a: "x", b: "y", c: "y"}, {a: 60.0, b: 20.0, c: 20.0}))
    assert profile.floor(0, brokers=2) == pytest.approx(1.2)
    assert profile.floor(0, brokers=1) == 1.0


def test_settling_needs_ten_cycles_within_1_25_of_the_floor() -> None:
    assert settle_cycles([2.0, 1.2, 1.2], [1.0] * 3, 0) == 1  # holds to the end
    bouncing = [1.2] * 5 + [1.3] + [1.2] * 20
    assert settle_cycles(bouncing, [1.0] * 26, 0) == 6
    assert settle_cycles([1.3] * 30, [1.0] * 30, 0) is None
    assert settle_cycles([2.4] * 12, [2.0] * 12, 2) == 0


def test_a_crashed_brokers_load_counts_as_moved() -> None:
    bundles = _bundles(4)
    owners = {b: f"b{i % 2}" for i, b in enumerate(bundles)}
    scenario = _tiny(owners, dict.fromkeys(bundles, 10.0), cycles=6,
                     membership=(Membership(3, leave=("b1",)),), moved_floor=0.5)
    result, _ = simulate(scenario, "OverloadShedder", seed=1)
    assert forced_share(scenario, result, Profile(scenario)) == pytest.approx(0.5)
    assert result.cycles[3].brokers == 1


def test_the_rolling_restart_floor_counts_each_later_leaver_at_1_over_19() -> None:
    scenario = build("rolling-restart", QUICK, seed=1)
    assert scenario.moved_floor == pytest.approx(1 + 2 / 20)
    # OverloadShedder never sheds onto a rejoined broker: what it moved is the crash re-placement
    # alone, each leaver's share while the broker before it was back empty - already above 1/20
    # + 19/20 - and it never reaches the balance the last 1/20 (the final refill) pays for.
    result, _ = simulate(scenario, "OverloadShedder", seed=1)
    forced = forced_share(scenario, result, Profile(scenario))
    assert not [m for m in result.moves if m.cycle >= scenario.disturbance]
    assert 1 + 1 / 20 < forced < scenario.moved_floor


def test_excess_is_what_brokers_above_the_mean_must_give_up() -> None:
    a, b, c, d = _bundles(4)
    loads = {a: 50.0, b: 10.0, c: 10.0, d: 10.0}
    # x: 70 with a 50 bundle (> the mean 40): it keeps that bundle and must give up 20
    assert excess({a: "x", b: "x", c: "x", d: "y"}, loads, ["x", "y"]) == pytest.approx(20.0)
    assert excess({a: "x", b: "y", c: "y", d: "y"}, loads, ["x", "y"]) == 0.0


def test_the_shortfall_is_the_give_or_the_take_whichever_is_more() -> None:
    a, b, c, d = _bundles(4)
    loads = {a: 30.0, b: 30.0, c: 20.0, d: 0.0}  # mean 40 over x, y
    owners, brokers = {a: "x", b: "x", c: "y", d: "y"}, ["x", "y"]
    assert shortfall(owners, loads, brokers, 1.0, 1.0) == pytest.approx(20.0)
    # max/mean 1.25 (50): x gives 10; min/mean 0.5 (20): y needs nothing; the take decides at 0.9
    assert shortfall(owners, loads, brokers, 1.25, 0.5) == pytest.approx(10.0)
    assert shortfall(owners, loads, brokers, 1.25, 0.9) == pytest.approx(16.0)
    # an idle third broker (mean 26.7): x gives 60 - 33.3 = 26.7, y and z take 4 + 24 = 28
    idle = shortfall(owners, loads, [*brokers, "z"], 1.25, 0.9)
    assert idle == pytest.approx(28.0)


@pytest.mark.parametrize("name", ["steady-zipf", "scale-out", "idle-broker"])
def test_no_strategy_moves_less_than_its_own_balance_needs(name: str) -> None:
    scenario = build(name, QUICK, seed=1)
    assert scenario.by_balance
    assert scenario.moved_minimum(1.0, 1.0) == pytest.approx(scenario.moved_floor, rel=0.02)
    for row in quality.rows(quick=True, scenarios=[name]):
        if row["moved_x"] is not None:
            assert row["moved_x"] >= 1.0 - 1e-9, row["strategy"]
        else:  # it reached nothing better than the start, so it needed nothing
            assert row["moved_min_pct"] == pytest.approx(0.0, abs=1e-9), row["strategy"]


def test_where_something_must_move_whatever_the_balance_the_minimum_is_the_floor() -> None:
    for name in ("hot-bundle", "scale-in", "rolling-restart"):
        scenario = build(name, QUICK, seed=1)
        assert not scenario.by_balance
        assert scenario.moved_minimum(1.3, 0.5) == scenario.moved_floor


def test_balanced_layout_spreads_equal_bundles_evenly() -> None:
    bundles = _bundles(6)
    owners = balanced_layout(dict.fromkeys(bundles, 1.0), ["x", "y", "z"])
    assert sorted(owners.values()) == ["x", "x", "y", "y", "z", "z"]


def test_idle_broker_stays_idle_under_threshold_without_the_lower_boundary() -> None:
    scenario = build("idle-broker", QUICK, seed=1)
    default = _row(scenario)
    assert default["moves"] == 0 and default["min_mean"] == 0.0 and default["moved_x_floor"] == 0.0
    assert default["moved_x"] is None  # its balance is the start's: it needs nothing
    lower = _row(scenario, lowerBoundarySheddingEnabled=True)
    assert lower["moves"] > 0 and lower["min_mean"] > 0.0


def test_quick_scenarios_are_deterministic_for_a_seed() -> None:
    for name in BUILDERS:
        assert build(name, QUICK, 4) == build(name, QUICK, 4)
    assert build("steady-zipf", QUICK, 4).owners != build("steady-zipf", QUICK, 5).owners
    first = quality.rows(quick=True, seed=2, scenarios=["hot-bundle"], names=["UniformLoadShedder"])
    second = quality.rows(quick=True, seed=2, scenarios=["hot-bundle"], names=["UniformLoadShedder"])
    assert [_without_timing(r) for r in first] == [_without_timing(r) for r in second]


def _without_timing(row: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in row.items() if k != "run_s"}


def test_scenarios_have_the_readme_shapes() -> None:
    scenarios = {name: build(name, QUICK, 1) for name in BUILDERS}
    for scenario in scenarios.values():
        assert len(scenario.base) == 320
    idle = scenarios["idle-broker"]
    usage = sum(idle.base.values()) / BROKER_CAPACITY / 10
    assert usage == pytest.approx(0.8) and len(idle.brokers) == 11
    assert len(set(idle.owners.values())) == 10
    restarts = scenarios["rolling-restart"].membership
    assert sorted(b for m in restarts for b in m.leave) == sorted(b for m in restarts for b in m.join)
    hot = hot_bundle(QUICK, 1)
    start, end = hot.hot_cycles
    assert hot.hot_bundle is not None and end - start == QUICK.hot
    assert hot.throughput(start)[hot.hot_bundle] == pytest.approx(10 * hot.base[hot.hot_bundle])
    day = scenarios["diurnal"]
    assert day.factor(0) == pytest.approx(0.4) and day.factor(QUICK.day // 2) == pytest.approx(1.6)


def test_every_registered_strategy_gets_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(STRATEGY_MODULES, "ZzzProjectShedder", "balancer.shedding.threshold")
    assert quality.strategies() == [*quality.PULSAR_STRATEGIES, "PlannedTransferShedder",
                                    "ZzzProjectShedder"]
    assert quality.strategy_config("TransferShedder")["loadManagerClassName"] == (
        "ExtensibleLoadManagerImpl"
    )


def test_render_prints_the_floors_beside_the_figures() -> None:
    rows = quality.rows(quick=True, scenarios=["idle-broker"], names=["OverloadShedder"])
    text = quality.render(rows)
    assert "idle-broker" in text and "floor" in text and "(m'-m)/m' = 1/11" in text
    assert "OverloadShedder" in text and "9.1" in text  # the moved floor, % of the load


def _figures(max_mean: float, std: float, moved_x: float | None, cycles: int | None,
             flaps: int) -> dict[str, Any]:
    return {"max_mean": max_mean, "std": std, "moved_x": moved_x, "cycles": cycles, "flaps": flaps}


def test_a_figure_misses_only_when_worse_than_the_best_by_more_than_5_percent() -> None:
    best = _figures(1.10, 0.020, 1.30, 7, 0)
    assert quality.worse_by_more_than_slack(_figures(1.15, 0.021, 1.36, 7, 0), best) == []
    ours = _figures(1.16, 0.022, 1.37, None, 1)
    assert quality.worse_by_more_than_slack(ours, best) == ["max/mean", "std", "x min", "cycles",
                                                            "flaps"]
    # "never" settling and "-" (nothing needed, nothing moved) are no worse than themselves
    assert quality.worse_by_more_than_slack(_figures(1.0, 0.0, None, None, 0),
                                            _figures(1.0, 0.0, None, None, 0)) == []


def test_the_markdown_names_the_best_pulsar_strategy_and_the_misses() -> None:
    table = []
    for strategy, figures in (("ThresholdShedder", _figures(1.2, 0.05, 2.0, 3, 0)),
                              ("AvgShedder", _figures(1.1, 0.02, 1.3, 7, 0)),
                              ("Mine", _figures(1.0, 0.03, 1.0, 0, 0))):
        table.append({"scenario": "s", "strategy": strategy, "max_mean_floor": 1.0,
                      "moved_pct": 5.0, "moved_min_pct": 4.0, "moved_x_floor": 0.9,
                      "unloads_h": 0.0, **figures})
    text = quality.versus_best(table, "Mine")
    assert "| s | 1.000, 0.0300, 1.00, 0, 0 | AvgShedder: 1.100, 0.0200, 1.30, 7, 0 | std |" in text
    assert quality.markdown(table).count("\n") == 4  # header, rule, three rows
