"""The best balance any strategy can reach for the load it moves, from a scenario's start.

Why issue 9's "no worse than the best Pulsar strategy on any metric" cannot hold for "moved" in
steady-zipf together with "std" in hot-bundle, as numbers anyone can re-run
(``python -m bench.frontier``).

The bound: let r_i be broker i's load over the mean at the start, e_i = max(0, r_i - 1) its
excess and d_i = max(0, 1 - r_i) its deficit (in units of the mean load). A strategy that moves a
budget B (B's "moved", a fraction of the load, times the broker count) sends at most B out of the
brokers above the mean and at most B into those below, so broker i still stands at least
e_i - out_i above the mean (d_i - in_i below). The least any layout can keep is water-filling:
every above-mean broker cut to ``1 + a``, every below-mean one raised to ``1 - b``, where a and b
are the smallest levels whose cuts fit in B. Hence, for every strategy and every lumpiness of
bundles: max/mean >= 1 + a, min/mean <= 1 - b, max - min >= a + b and population std >=
sqrt((sum min(e_i, a)^2 + sum min(d_i, b)^2) / n). Conversely a population std s of n brokers
bounds their range: max - min <= s * sqrt(2 n) (two brokers at +-range/2, the rest at the mean).

Invariants: pure arithmetic on the scenario's start layout; the strategy runs come from
``bench.quality`` (same seeds, same figures as the B table).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.quality import PULSAR_STRATEGIES, rows
from bench.scenarios import FULL, QUICK, Scenario, build

SLACK = 1.05  # issue 9: "worse than the best Pulsar strategy by more than 5 %"


def level(values: Sequence[float], budget: float) -> float:
    """The smallest a >= 0 with sum(max(0, v - a)) <= budget (``values`` >= 0)."""
    ordered = sorted((v for v in values if v > 0), reverse=True)
    prefix = 0.0
    for k, v in enumerate(ordered, start=1):
        prefix += v
        below = ordered[k] if k < len(ordered) else 0.0
        if prefix - k * below >= budget:  # the cut at ``below`` already spends the budget
            return max(0.0, (prefix - budget) / k)
    return 0.0


@dataclass(frozen=True)
class Bound:
    """The best any strategy can do from a start layout when it moves ``moved`` of the load."""

    moved: float  # fraction of the cluster's load
    max_mean: float  # at least this
    min_mean: float  # at most this
    spread: float  # max/mean - min/mean, at least this
    std: float  # population std of load / mean, at least this

    def std_at(self, mean_usage: float) -> float:
        return self.std * mean_usage


def start_loads(scenario: Scenario) -> dict[str, float]:
    """Each broker's load (bytes/s in+out) in the scenario's start layout."""
    totals = dict.fromkeys(scenario.brokers, 0.0)
    for bundle, owner in scenario.owners.items():
        totals[owner] += scenario.base[bundle]
    return totals


def start_ratios(scenario: Scenario) -> list[float]:
    """Each broker's load over the mean load in the scenario's start layout."""
    totals = start_loads(scenario)
    mean = sum(totals.values()) / len(totals)
    return [t / mean for t in totals.values()]


def mean_usage(scenario: Scenario) -> float:
    """The brokers' mean usage (0..1) in the start layout, at the rate factor 1."""
    usages = [scenario.brokers[b].base + scenario.brokers[b].per_byte * load
              for b, load in start_loads(scenario).items()]
    return sum(usages) / len(usages)


def bound(ratios: Sequence[float], moved: float) -> Bound:
    excess = [max(0.0, r - 1.0) for r in ratios]
    deficit = [max(0.0, 1.0 - r) for r in ratios]
    budget = moved * len(ratios)
    a, b = level(excess, budget), level(deficit, budget)
    squares = sum(min(e, a) ** 2 for e in excess) + sum(min(d, b) ** 2 for d in deficit)
    return Bound(moved, 1.0 + a, 1.0 - b, a + b, math.sqrt(squares / len(ratios)))


def widest_spread(std: float, mean_usage: float, brokers: int) -> float:
    """The largest max/mean - min/mean a population std of ``std`` (usage) allows."""
    return std / mean_usage * math.sqrt(2 * brokers)


def best_pulsar(table: Sequence[Mapping[str, Any]], scenario: str) -> Mapping[str, Any]:
    """The Pulsar strategy that balances best there: lowest max/mean, then lowest std."""
    mine = [r for r in table if r["scenario"] == scenario and r["strategy"] in PULSAR_STRATEGIES]
    return min(mine, key=lambda r: (round(r["max_mean"], 3), r["std"]))


def report(quick: bool = False, seed: int = 1) -> str:
    """Each strategy's steady-zipf figures beside the bound at its own "moved", then the verdict."""
    size = QUICK if quick else FULL
    scenarios = {name: build(name, size, seed) for name in ("steady-zipf", "hot-bundle", "diurnal")}
    table = rows(quick, seed, scenarios)
    zipf = scenarios["steady-zipf"]
    ratios, usage = start_ratios(zipf), mean_usage(zipf)
    lines = [f"{'scenario':<12} {'strategy':<23} {'moved x min':>11} {'max/mean (bound)':>17} "
             f"{'std (bound)':>16}"]
    for r in (r for r in table if r["scenario"] == zipf.name):
        b = bound(ratios, r["moved_pct"] / 100.0)
        lines.append(f"{r['scenario']:<12} {r['strategy']:<23} {r['moved_x']:>11.2f} "
                     f"{r['max_mean']:>8.3f} ({b.max_mean:.3f}) {r['std']:>7.4f} ({b.std_at(usage):.4f})")
    return "\n".join([*lines, "", *verdict(table, scenarios)])


def verdict(table: Sequence[Mapping[str, Any]], scenarios: Mapping[str, Scenario]) -> list[str]:
    """The demands side by side: the spread steady-zipf must keep, the one hot-bundle allows, and
    the std diurnal allows from the same start."""
    steady, hot, day = (best_pulsar(table, name) for name in ("steady-zipf", "hot-bundle", "diurnal"))
    zipf, hot_scenario = scenarios["steady-zipf"], scenarios["hot-bundle"]
    allowed = SLACK * steady["moved_pct"] / 100.0
    b = bound(start_ratios(zipf), allowed)
    widest = widest_spread(SLACK * hot["std"], mean_usage(hot_scenario), len(hot_scenario.brokers))
    # diurnal starts from steady-zipf's layout and scales every bundle alike: a strategy that
    # makes the same moves there keeps the same ratios (its std at the median rate factor, 1).
    day_std = b.std_at(mean_usage(scenarios["diurnal"]))
    lines = [
        f"steady-zipf: the best Pulsar strategy, {steady['strategy']}, moved "
        f"{steady['moved_x']:.2f}x the minimum; moving at most {SLACK:.2f} times that "
        f"({allowed * 100:.1f} % of the load) leaves, whatever the strategy, max/mean >= "
        f"{b.max_mean:.4f}, min/mean <= {b.min_mean:.4f}: a spread >= {b.spread * 100:.2f} % of "
        f"the mean, std >= {b.std_at(mean_usage(zipf)):.4f}.",
        f"hot-bundle: the best Pulsar strategy, {hot['strategy']}, settled at std {hot['std']:.5f}; "
        f"std <= {SLACK:.2f} times that allows a spread <= {widest * 100:.2f} % of the mean.",
        f"diurnal (the same start): the best Pulsar strategy, {day['strategy']}, settled at std "
        f"{day['std']:.5f}; <= {SLACK * day['std']:.5f} is needed where the same moves leave at "
        f"best {day_std:.5f} (perfect water-filling; whole bundles do worse).",
    ]
    if b.spread > widest:
        lines.append(f"Meeting all three, a strategy stops at a spread of {b.spread * 100:.2f} % or more "
                     f"in one scenario and keeps moving until {widest * 100:.2f} % in another, and "
                     f"comes within {SLACK * day['std'] / day_std - 1:.0%} of the bound in the third.")
    else:
        lines.append("No conflict: the spread steady-zipf must keep fits within the one hot-bundle allows.")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frontier", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(report(args.quick, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
