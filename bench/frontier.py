"""The best balance any strategy can reach for the load it moves, from a scenario's start.

The converse of the B table's "x min" (``scenarios.shortfall``: the least load that reaches a
balance), as numbers anyone can re-run (``python -m bench.frontier``): each strategy's settled
balance in steady-zipf beside the best balance its own "moved" could have bought.

The bound: let r_i be broker i's load over the mean at the start, e_i = max(0, r_i - 1) its
excess and d_i = max(0, 1 - r_i) its deficit (in units of the mean load). A strategy that moves a
budget B (B's "moved", a fraction of the load, times the broker count) sends at most B out of the
brokers above the mean and at most B into those below, so broker i still stands at least
e_i - out_i above the mean (d_i - in_i below). The least any layout can keep is water-filling:
every above-mean broker cut to ``1 + a``, every below-mean one raised to ``1 - b``, where a and b
are the smallest levels whose cuts fit in B. Hence, for every strategy and every lumpiness of
bundles: max/mean >= 1 + a, min/mean <= 1 - b, max - min >= a + b and population std >=
sqrt((sum min(e_i, a)^2 + sum min(d_i, b)^2) / n).

Invariants: pure arithmetic on the scenario's start layout; the strategy runs come from
``bench.quality`` (same seeds, same figures as the B table).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from bench.quality import rows
from bench.scenarios import FULL, QUICK, Scenario, build


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


def report(quick: bool = False, seed: int = 1) -> str:
    """Each strategy's steady-zipf figures beside the bound at its own "moved"."""
    size = QUICK if quick else FULL
    zipf = build("steady-zipf", size, seed)
    ratios, usage = start_ratios(zipf), mean_usage(zipf)
    lines = [f"{'strategy':<23} {'moved %':>7} {'x min':>5} {'x floor':>7} "
             f"{'max/mean (bound)':>17} {'std (bound)':>16}"]
    for r in rows(quick, seed, [zipf.name]):
        b = bound(ratios, r["moved_pct"] / 100.0)
        least = "-" if r["moved_x"] is None else f"{r['moved_x']:.2f}"
        lines.append(f"{r['strategy']:<23} {r['moved_pct']:>7.1f} {least:>5} "
                     f"{r['moved_x_floor']:>7.2f} {r['max_mean']:>8.3f} ({b.max_mean:.3f}) "
                     f"{r['std']:>7.4f} ({b.std_at(usage):.4f})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frontier", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(report(args.quick, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
